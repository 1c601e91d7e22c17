"""The planning stage: resolve a spec into inputs, build serving templates (homogeneous and mixed
pipelines, with the exact pipeline placement and an on-disk cache), solve the allocation (through
``hetinfra.solver``), and record the result as plan.json and a summary."""
