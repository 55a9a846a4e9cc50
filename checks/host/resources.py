"""CPUs and memory: host.cpu_count (logical CPUs online) and host.memory (MemTotal
and EDAC error counts)."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import GIB, NODE, host_info


@parameters
class CpuCountParams(Params):
    min: int | None = param(None, ge=1, doc="the least logical CPUs online; null: not judged")


@check("host.cpu_count", needs=("host",), params=CpuCountParams,
       remedy="CPUs are missing: check the BIOS (cores or SMT disabled) and whether the "
              "kernel offlined CPUs after machine checks (/sys/devices/system/cpu/online).",
       actions=(Action.INVESTIGATE,))
def cpu_count(ctx: CheckContext) -> Iterator[Finding]:
    """At least ``min`` logical CPUs are online (``min`` from config or profile)."""
    host = host_info(ctx)
    minimum = CpuCountParams.of(ctx).min
    if isinstance(host, Finding):
        yield host
    elif minimum is None:
        yield Finding.skip(NODE, "no minimum CPU count configured")
    elif host.cpu_count is None:
        yield Finding.error(NODE, "CPU count unreadable", host.unknown.get("cpu_count"))
    elif host.cpu_count < minimum:
        yield Finding.fail(NODE, "fewer CPUs online than expected", host.cpu_count,
                           f">= {minimum}")
    else:
        yield Finding.passed(NODE, "CPU count as expected", host.cpu_count, f">= {minimum}")


@parameters
class MemoryParams(Params):
    min_gib: float | None = param(
        None, ge=0, doc="the least MemTotal in GiB (a little below installed RAM); null: "
        "not judged")
    edac_uncorrected_max: int = param(
        0, ge=0, doc="uncorrected EDAC errors a memory controller may have counted")
    edac_corrected_warn: int = param(
        100, ge=0, doc="corrected EDAC errors past which a memory controller warns")


@check("host.memory", needs=("host",), params=MemoryParams,
       remedy="Memory size below the minimum means a DIMM is missing or disabled; "
              "uncorrected EDAC errors mean a failing DIMM: find it with edac-util or the "
              "BMC event log and replace it. A reboot resets the counts, not the DIMM.",
       actions=(Action.INVESTIGATE,))
def memory(ctx: CheckContext) -> Iterator[Finding]:
    """Memory size (MemTotal, a little below installed RAM) and EDAC error counts.

    EDAC counts are totals since boot or driver load. Any uncorrected error means a DIMM
    or controller lost data; corrected errors are routine in small numbers, so only a
    count past ``edac_corrected_warn`` warns (a DIMM that starts to fail usually shows a
    rising corrected count first).
    """
    host = host_info(ctx)
    if isinstance(host, Finding):
        yield host
        return
    params = MemoryParams.of(ctx)
    min_gib = params.min_gib
    if min_gib is None:
        yield Finding.skip(NODE, "no minimum memory size configured")
    elif host.memory_total_bytes is None:
        yield Finding.error(NODE, "memory size unreadable", host.unknown.get("memory_total_bytes"))
    else:
        gib = round(host.memory_total_bytes / GIB, 1)
        if gib < min_gib:
            yield Finding.fail(NODE, "less memory than expected", gib, f">= {min_gib:g} GiB")
        else:
            yield Finding.passed(NODE, "memory size as expected", gib, f">= {min_gib:g} GiB")
    if not host.edac:
        yield Finding.skip(NODE, "no EDAC memory controllers exposed")
    ue_max, ce_warn = params.edac_uncorrected_max, params.edac_corrected_warn
    for mc in host.edac:
        counts = {"corrected": mc.corrected, "uncorrected": mc.uncorrected}
        if mc.corrected is None or mc.uncorrected is None:
            reasons = {k: v for k, v in host.unknown.items() if k.startswith(f"edac.{mc.name}.")}
            yield Finding.error(mc.name, "EDAC error count unreadable", reasons)
        elif mc.uncorrected > ue_max:
            yield Finding.fail(mc.name, "uncorrected memory errors (EDAC)", counts,
                               f"uncorrected <= {ue_max}")
        elif mc.corrected > ce_warn:
            yield Finding.warn(mc.name, "many corrected memory errors (EDAC)", counts,
                               f"corrected <= {ce_warn}")
        else:
            yield Finding.passed(mc.name, "EDAC error counts within limits", counts)
