"""fabric.clique: the GPUs of an NVL72 tray share one cluster UUID and clique id."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from ...agent.model.gpu import FabricInfo, Gpu
from ..core.common import gpu_component
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from .helpers import NODE, STATE_COMPLETED, fabric_gpus

ZERO_UUID = "00000000-0000-0000-0000-000000000000"


# -- fabric.clique ---------------------------------------------------------------------


def _clique(fabric: FabricInfo) -> str:
    return f"{fabric.cluster_uuid}/{fabric.clique_id}"


def _zero_uuid(value: str) -> bool:
    return not value or value.strip("0-") == ""


@check("fabric.clique", needs=("nvml",),
       remedy="Every GPU of an NVL72 tray must be in the rack's NVLink domain (cluster UUID) "
              "and partition (clique id). A GPU with zeros was not placed in a partition; "
              "a GPU in another clique than its tray mates was partitioned apart. Check the "
              "partition in NMX / NVOS on the switch trays, then the tray's NVLink "
              "connections.",
       actions=(Action.INVESTIGATE,))
def clique(ctx: CheckContext) -> Iterator[Finding]:
    """The GPUs of an NVL72 tray share one non-zero cluster UUID and clique id.

    NVML fabric info names each GPU's NVLink domain (cluster UUID) and partition (clique
    id); GPUs with the same pair talk over NVLink across trays (Mission Control admin guide). On a
    tray every GPU must have a non-zero pair, and all of them the same one; the odd GPU
    is named. Only NVL72 trays: a healthy H100/H200 HGX board reports zeros.
    ``cluster.nvl_domain`` compares the trays of one rack.
    """
    if not ctx.profile.nvl72:
        yield Finding.skip(NODE, "clique applies to NVL72 trays")
        return
    findings, judged = fabric_gpus(ctx)
    yield from findings
    members: list[tuple[Gpu, FabricInfo]] = []
    for gpu, fabric in judged:
        component = gpu_component(gpu)
        if fabric.state != STATE_COMPLETED:
            yield Finding.skip(component, "fabric registration not completed "
                                          "(fabric.state reports it)")
        elif _zero_uuid(fabric.cluster_uuid) or fabric.clique_id == 0:
            yield Finding.fail(component, "GPU not in an NVLink clique", _clique(fabric),
                               "non-zero cluster UUID and clique id", Action.INVESTIGATE)
        else:
            members.append((gpu, fabric))
    if not members:
        return
    counts = Counter(_clique(fabric) for _, fabric in members)
    (majority, top), *rest = counts.most_common()
    if not rest:
        yield Finding.passed(NODE, "GPUs of the tray share one NVLink clique", majority)
        return
    if rest[0][1] == top:
        yield Finding.fail(NODE, "GPUs of the tray disagree on their NVLink clique",
                           {gpu_component(g): _clique(f) for g, f in members},
                           "one cluster UUID and clique id", Action.INVESTIGATE)
        return
    for gpu, fabric in members:
        if _clique(fabric) != majority:
            yield Finding.fail(gpu_component(gpu), "GPU in another NVLink clique than the "
                                                   "rest of the tray",
                               _clique(fabric), majority, Action.INVESTIGATE)
