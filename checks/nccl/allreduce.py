"""nccl.allreduce: the all-reduce bandwidth a real run reached (--level full)."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE


@parameters
class AllreduceParams(Params):
    program: str = param("all_reduce_perf", doc="nccl-tests' all_reduce_perf: a path or "
                         "a name on PATH")
    args: tuple[str | int, ...] | None = param(
        None, doc="its arguments; null: the collector's (-b 512M -e 1G -f 2 -w 5 -n 20)")
    min_busbw_fraction: float = param(
        0.9, ge=0, le=1, doc="the share of the profile's expected bus bandwidth under "
        "which the run fails")


@check("nccl.allreduce", needs=("allreduce",), active=True, params=AllreduceParams,
       remedy="Compare with nvidia-smi topo -m and nvlink.* findings; a low bus bandwidth on "
              "one node with healthy links usually means a GPU clocked down (gpu.clock_events) "
              "or a PCIe/NVLink fault. Wrong results mean bad GPU memory or links: drain it.",
       actions=(Action.INVESTIGATE, Action.DRAIN))
def allreduce(ctx: CheckContext) -> Iterator[Finding]:
    """nccl-tests all_reduce_perf on every local GPU: bus bandwidth and correct results."""
    run = ctx.snapshot.allreduce
    if run is None:
        yield Finding.skip(NODE, "all_reduce_perf was not run")
        return
    if run.returncode is None:
        if (run.error or "").endswith("not found"):
            yield Finding.skip(NODE, "nccl-tests all_reduce_perf is not installed on this node")
        else:
            yield Finding.error(NODE, f"all_reduce_perf did not finish: {run.error}")
        return
    if run.wrong:
        yield Finding.fail(NODE, "all_reduce_perf returned wrong results", run.wrong, 0,
                           Action.DRAIN)
        return
    if run.returncode != 0 or run.busbw_gbps is None:
        yield Finding.fail(NODE, "all_reduce_perf failed", run.output_tail or run.returncode,
                           "exit status 0 and a bandwidth table", Action.INVESTIGATE)
        return
    expected = ctx.profile.allreduce_busbw_gbps
    observed = {"busbw_gbps": run.busbw_gbps, "size_bytes": run.size_bytes,
                "avg_busbw_gbps": run.avg_busbw_gbps}
    if expected is None:
        yield Finding.passed(NODE, "all_reduce_perf ran (no expected bandwidth in the profile)",
                             observed)
        return
    floor = expected * (AllreduceParams.of(ctx).min_busbw_fraction or 1.0)
    if run.busbw_gbps < floor:
        yield Finding.fail(NODE, "all-reduce bus bandwidth below the profile's expectation",
                           observed, f">= {floor:g} GB/s", Action.INVESTIGATE)
    else:
        yield Finding.passed(NODE, "all-reduce bus bandwidth as expected", observed,
                             f">= {floor:g} GB/s")
