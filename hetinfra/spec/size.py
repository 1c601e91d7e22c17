"""How much one plan may hold: the request classes it plans, counted over models and their variants.

Planning builds a serving template for every (instance type, layout) of each model variant and rates
it for every class of the model; the solver then routes each class over those templates, and
verification simulates each class. The work grows with classes x variants (and faster than linearly
in the solves): on this project's 2-core reference machine, one 8B model over the three clouds took
(``tools/schema_maxima.py``; `plan` with verification and baselines, the machine shared, load 14):

    256 classes (16 x 16 histogram)     8 s
    1,024 classes (32 x 32)            39 s
    4,096 classes (64 x 64)           495 s   (past the default work budget, planning.time_limit_s = 300 s)

At this bound, load 3-5: a 32 x 32 histogram 45 s, 1,024 explicit classes 33 s, 4 models x 256 14 s,
342 classes x 3 variants 13 s (and all 42 regions as origins with locality, not bounded here: 37 s).

So a spec may plan at most :data:`MAX_PLANNED_CLASSES` (model, variant, class) triples in all, and
one past it is refused at spec load, naming the models and what to coarsen, rather than accepted and
cut by the work budget's safety stop. A class is a non-empty histogram bucket, an explicit class, or
a bucket of a dataset's grid (counted at its edges, before the CSV is read: every bucket may fill).
"""

from __future__ import annotations

#: most (model, variant, class) triples one spec plans (see the module docstring for the figures)
MAX_PLANNED_CLASSES = 1024


def class_count(sizes) -> tuple[int, str]:
    """How many classes ``sizes`` (a SizesSpec) plans at most, and how that is counted, in words."""
    if sizes.classes is not None:
        return len(sizes.classes), f"{len(sizes.classes)} explicit classes"
    if sizes.histogram is not None:
        h = sizes.histogram
        n = sum(1 for row in h.weights for w in row if w > 0)
        return n, f"a {len(h.input_edges) - 1}x{len(h.output_edges) - 1} histogram with {n} non-empty buckets"
    d = sizes.dataset
    rows, cols = len(d.input_edges) - 1, len(d.output_edges) - 1
    return rows * cols, f"a dataset bucketed {rows}x{cols} (up to {rows * cols} classes)"


def planned_classes(model) -> tuple[int, str]:
    """(model, variant, class) triples of one ModelSpec, and how they are counted."""
    n, how = class_count(model.demand.sizes)
    variants = len(model.variants or ()) or 1
    return n * variants, how + (f" x {variants} variants" if variants > 1 else "")


COARSEN = ("coarsen demand.sizes (fewer histogram or dataset edges: merged buckets are planned at their "
           "upper edges, so the plan stays conservative), merge classes, or split the models over several specs")


def check_model_size(model) -> None:
    """A ValueError when one model alone plans more than MAX_PLANNED_CLASSES triples (the one check of
    demand.sizes.classes' length too: the JSON schema's maxItems, with the fix in the message)."""
    n, how = planned_classes(model)
    if n > MAX_PLANNED_CLASSES:
        raise ValueError(f"demand.sizes plans {n} request classes ({how}), more than the {MAX_PLANNED_CLASSES} one spec may plan "
                         f"within planning.time_limit_s; {COARSEN}")


def check_plan_size(models) -> None:
    """A ValueError when the models together plan more than MAX_PLANNED_CLASSES triples."""
    counts = sorted(((planned_classes(m)[0], m.name) for m in models), key=lambda c: (-c[0], c[1]))
    total = sum(n for n, _ in counts)
    if total > MAX_PLANNED_CLASSES:
        top = ", ".join(f"{name} {n}" for n, name in counts[:3]) + (", ..." if len(counts) > 3 else "")
        raise ValueError(f"the models plan {total} request classes in all ({top}), more than the "
                         f"{MAX_PLANNED_CLASSES} one spec may plan within planning.time_limit_s; {COARSEN}")
