"""deploy.target kubernetes: the plan may use only cloud regions that have a cluster (issue 36).

hetinfra never creates clusters, so a unit in a cloud region without one in
``deploy.kubernetes.clusters`` could never be applied. At plan input time (hetinfra.plan.inputs):

- clusters declared: only offers in their cloud regions are planned; none there is an error naming
  the clusters and the regions that have offers;
- none declared: the plan is made as for VMs, with a warning that apply needs a cluster per cloud
  region it uses (plan.json ``breakdown.by_region`` lists them).
"""

from __future__ import annotations

from hetinfra.errors import InvalidInputError


def restrict_to_clusters(spec, offers: list, locate=None) -> tuple[list, list[str]]:
    """(the offers a Kubernetes plan may use, warnings); other targets: (offers, [])."""
    if spec.deploy.target != "kubernetes":
        return offers, []
    clusters = set(spec.deploy.kubernetes.clusters)
    if not clusters:
        return offers, ["deploy.target kubernetes without deploy.kubernetes.clusters: apply needs one cluster per "
                        "cloud region the plan uses (plan.json breakdown.by_region lists them)"]
    inside = [o for o in offers if f"{o.cloud}/{o.region}" in clusters]
    if not inside:
        where = locate("deploy", "kubernetes", "clusters") if locate else "spec"
        regions = sorted({f"{o.cloud}/{o.region}" for o in offers})
        raise InvalidInputError(f"{where}: deploy.kubernetes.clusters ({', '.join(sorted(clusters))}) has no cluster in "
                                f"a cloud region with an allowed offer ({', '.join(regions[:8])}"
                                f"{', ...' if len(regions) > 8 else ''})",
                                hint="add a cluster for a cloud region the infrastructure allows, or widen it")
    empty = sorted(clusters - {f"{o.cloud}/{o.region}" for o in inside})
    notes = [f"deploy.kubernetes.clusters {', '.join(empty)}: no allowed offer there; unused"] if empty else []
    return inside, notes
