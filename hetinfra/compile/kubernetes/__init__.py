"""Kubernetes manifests of a plan (``deploy.target: kubernetes``): one folder per cloud-region cluster,
``OUT/kubernetes/<cloud>-<region>/``, ready for ``kubectl apply -k`` or a GitOps tool.

Each folder holds ``nodes.yaml`` (the GPU capacity: hetinfra.compile.kubernetes.nodes),
``units/<unit>.yaml`` (the workload, its Service, PodDisruptionBudget and scaler), ``gateway.yaml``
(hetinfra's gateway or the inference extension's pools and routes) and a ``kustomization.yaml``
listing them. Secrets are referenced by name (``<service>-secrets``), never written.
"""

from __future__ import annotations

from hetinfra import lazy_names

# The public names load on first use, not with the package (hetinfra.lazy_names says why).
__all__ = ["cluster_key", "kube_units", "render_clusters", "write_kubernetes"]
__getattr__ = lazy_names(__name__, dict.fromkeys(__all__, "hetinfra.compile.kubernetes.render"))
