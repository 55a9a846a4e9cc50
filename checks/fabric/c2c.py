"""c2c.links and c2c.error_rate: the NVLink-C2C links between each GPU and its Grace CPU.

On a Grace system (GH200, GB200, GB300) a GPU reaches its CPU, host memory and, through
the CPU's PCIe, its NICs over NVLink-C2C (NCCL's ``P2C`` path): a C2C link down slows
every host transfer and GPUDirect RDMA of that GPU. NVML reads the links per GPU (nvml.h
fields 170-172: count, status, bandwidth; 231-233 since NVML 575: CRC, replay and
back-to-back replay counters, collected by agent/collectors/nvml_read.py). An x86 host
has no C2C: NVML answers NotSupported there, and both checks skip, saying so.

No published figure says what a C2C link's bandwidth must be (only the superchip's
total, 900 GB/s bidirectional on GB200), so none is judged: the GPUs of one tray are
compared with each other. Nor does any source give a C2C error threshold (DCGM exports
the counters, DCGM_FI_DEV_C2C_LINK_ERROR_*, with no health rule), so growing counters
warn unless a site configures a rate that fails.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterator, Mapping
from typing import Any

from ...agent.model.gpu import C2cLink, Gpu
from ..core.common import (
    NODE,
    gpu_component,
    nvml_gpus,
    previous_gpu,
    rate_interval,
    unanswered_skip,
)
from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.rates import DEFAULT_MIN_EVENTS, MIN_EVENTS_DOC, counter_rate
from ..core.registry import CheckContext, check

_UNSUPPORTED = "NVLink-C2C not reported on this GPU (no Grace CPU)"
_COUNTER_TEXT = {"crc": "C2C CRC errors", "replay": "C2C replays",
                 "replay_b2b": "C2C back-to-back replays"}


def c2c_gpus(ctx: CheckContext) -> tuple[list[Finding], list[Gpu]]:
    """The GPUs with C2C links to judge, and the skip/error findings for the rest.

    NotSupported (or, on a driver older than the fields, InvalidArgument) for the link
    count is a skip: no Grace CPU. A GPU NVML reports no C2C link for skips too; one whose
    C2C values could not be read is an error, never a hardware verdict.
    """
    gpus = nvml_gpus(ctx.snapshot)
    if isinstance(gpus, Finding):
        return [gpus], []
    findings: list[Finding] = []
    judged: list[Gpu] = []
    for gpu in gpus:
        component = gpu_component(gpu)
        unanswered = unanswered_skip(gpu)
        errors = {k: v for k, v in gpu.errors.items()
                  if k in ("fields", "c2c_link_count", "c2c_fields")}
        if unanswered is not None:
            findings.append(unanswered)
        elif errors:
            findings.append(Finding.error(component, "NVLink-C2C values unreadable", errors))
        elif gpu.c2c_link_count is None:
            findings.append(Finding.skip(component, _UNSUPPORTED,
                                         gpu.unsupported.get("c2c_link_count")))
        elif gpu.c2c_link_count <= 0 or not gpu.c2c_links:
            findings.append(Finding.skip(component, "no NVLink-C2C link on this GPU",
                                         {"c2c_link_count": gpu.c2c_link_count,
                                          "c2c_enabled": gpu.c2c_enabled}))
        else:
            judged.append(gpu)
    unsupported = [f for f in findings if f.message == _UNSUPPORTED]
    if not judged and unsupported:
        # No GPU of the node has C2C (an x86 host): one skip for the node, beside what a
        # GPU that did not answer or could not be read says for itself.
        rest = [f for f in findings if f.message != _UNSUPPORTED]
        return [Finding.skip(NODE, _UNSUPPORTED, unsupported[0].observed), *rest], []
    return findings, judged


def _link_errors(gpu: Gpu) -> dict[str, str]:
    """Read errors of the links' status and bandwidth (the counters are error_rate's)."""
    return {k: v for k, v in gpu.errors.items()
            if k.startswith("c2c_links.") and ".errors." not in k}


def _bandwidth(links: list[C2cLink]) -> tuple[int, ...]:
    """The distinct bandwidths of a GPU's active links: one value on a healthy GPU. NVML
    gives a bandwidth for active links only (nvml.h, field 172)."""
    return tuple(sorted({link.max_bw_mbps for link in links
                         if link.active and link.max_bw_mbps is not None}))


def _odd_ones(values: Mapping[int, Hashable]) -> tuple[Hashable | None, set[int]]:
    """The value more than half the GPUs hold (None when none does) and the GPUs that
    differ: those off the majority, or every GPU when the tray splits with no majority."""
    if len(set(values.values())) <= 1:
        return next(iter(values.values()), None), set()
    common, held = Counter(values.values()).most_common(1)[0]
    if held * 2 > len(values):
        return common, {index for index, value in values.items() if value != common}
    return None, set(values)


def _mbps(values: Hashable) -> str:
    return ", ".join(f"{v} MB/s" for v in values) if isinstance(values, tuple) else "none"


@check("c2c.links", needs=("nvml",),
       remedy="A C2C link down, or a GPU whose C2C links differ from the rest of its tray, "
              "slows everything the GPU moves to or through its Grace CPU: host memory, and "
              "on GB200/GB300 the NICs (NCCL's P2C path). Reboot the tray: the links train "
              "at boot. A link still down or still different after a reboot is the "
              "superchip board's: run NVIDIA's field diagnostics and open an RMA.",
       actions=(Action.REBOOT,))
def links(ctx: CheckContext) -> Iterator[Finding]:
    """Every NVLink-C2C link of each GPU is up, and a tray's GPUs agree in C2C links.

    Per GPU, each link's status (nvml.h field 171, 1 = ACTIVE) must be active: one that is
    not fails naming the GPU and the link. Then the GPUs of the node (a tray) are compared:
    the number of C2C links (field 170) and each active link's bandwidth (field 172) must
    be the same on every GPU; a GPU off the tray's majority fails, and a tray split with no
    majority fails every GPU. No absolute bandwidth or link count is judged: no source
    gives one per GPU.
    """
    findings, judged = c2c_gpus(ctx)
    yield from findings
    if not judged:
        return
    readable: list[Gpu] = []
    for gpu in judged:
        errors = _link_errors(gpu)
        if errors:
            yield Finding.error(gpu_component(gpu), "NVLink-C2C link status unreadable", errors)
        else:
            readable.append(gpu)
    count, odd_count = _odd_ones({gpu.index: gpu.c2c_link_count for gpu in readable})
    bandwidth, odd_bw = _odd_ones({gpu.index: _bandwidth(gpu.c2c_links) for gpu in readable})
    for gpu in readable:
        component = gpu_component(gpu)
        total = len(gpu.c2c_links)
        down = [link.link for link in gpu.c2c_links if link.active is False]
        bad = False
        if down:
            bad = True
            yield Finding.fail(component, "NVLink-C2C links down",
                               f"{total - len(down)}/{total} (down: "
                               f"{', '.join(map(str, down))})", f"{total}/{total}",
                               Action.REBOOT)
        if gpu.index in odd_count:
            bad = True
            yield Finding.fail(component, "NVLink-C2C link count differs from the tray's",
                               gpu.c2c_link_count,
                               count if count is not None else "one count on every GPU",
                               Action.REBOOT)
        if gpu.index in odd_bw:
            bad = True
            yield Finding.fail(component, "NVLink-C2C link bandwidth differs from the tray's",
                               _mbps(_bandwidth(gpu.c2c_links)),
                               _mbps(bandwidth) if bandwidth is not None
                               else "one bandwidth on every GPU", Action.REBOOT)
        if not bad:
            observed: dict[str, Any] = {"links": f"{total}/{total} up",
                                        "bandwidth": _mbps(_bandwidth(gpu.c2c_links))}
            if gpu.c2c_enabled is not None:
                observed["c2c_mode"] = "enabled" if gpu.c2c_enabled else "disabled"
            yield Finding.passed(component, "NVLink-C2C links up and alike across the tray",
                                 observed)


@parameters
class C2cErrorRateParams(Params):
    min_events: int = param(DEFAULT_MIN_EVENTS, ge=1, doc=MIN_EVENTS_DOC)
    warn_per_s: float = param(
        0.0, ge=0, doc="C2C CRC, replay or back-to-back replay errors a second above which "
        "a link warns (no published threshold: sustained growth is reported)")
    fail_per_s: float | None = param(
        None, ge=0, doc="errors a second at which a link fails; null: never fails (no "
        "published threshold)")


@check("c2c.error_rate", needs=("nvml",), rate=True, params=C2cErrorRateParams,
       remedy="C2C error counters that keep growing mean a marginal link between the GPU "
              "and its Grace CPU: retries cost bandwidth before they cost data. Watch them "
              "over the next hours (DCGM exports them too: DCGM_FI_DEV_C2C_LINK_ERROR_*); "
              "errors that keep coming after a tray reboot are the superchip board's: run "
              "NVIDIA's field diagnostics and open an RMA.",
       actions=(Action.INVESTIGATE, Action.REBOOT))
def error_rate(ctx: CheckContext) -> Iterator[Finding]:
    """NVLink-C2C error and replay counters grow slowly enough, per link.

    The CRC, replay and back-to-back replay counters (NVML 575+, fields 231-233) only
    grow, so two samples are compared (``--level full``, or the agent's previous one). An
    increase of at least ``min_events`` faster than ``warn_per_s`` warns; one at
    ``fail_per_s`` fails, where a site sets it. A driver without the counters skips.
    """
    findings, judged = c2c_gpus(ctx)
    yield from findings
    if not judged:
        return
    previous = ctx.previous
    dt = rate_interval(previous, ctx.snapshot, "C2C counters")
    if isinstance(dt, Finding):
        yield dt
        return
    params = C2cErrorRateParams.of(ctx)
    for gpu in judged:
        component = gpu_component(gpu)
        old = previous_gpu(previous, gpu)
        if old is None:
            yield Finding.skip(component, "GPU not in the earlier sample")
            continue
        unreadable = {k: v for k, v in gpu.errors.items()
                      if k.startswith("c2c_links.") and ".errors." in k}
        if unreadable:
            yield Finding.error(component, "NVLink-C2C error counters unreadable", unreadable)
            continue
        old_links = {link.link: link for link in old.c2c_links}
        judged_counters, bad = 0, False
        for link in gpu.c2c_links:
            before = old_links.get(link.link)
            for name, value in sorted(link.errors.items()):
                rate = counter_rate(before.errors.get(name) if before else None, value, dt)
                if rate is None:
                    continue
                judged_counters += 1
                if not rate.over_per_s(params.warn_per_s, params.min_events):
                    continue
                bad = True
                observed = {"counter": name, **rate.to_dict(), "per_s": round(rate.per_s, 3)}
                text = f"{_COUNTER_TEXT.get(name, name)} increasing"
                where = f"{component}.c2c{link.link}"
                if params.fail_per_s is not None and rate.per_s >= params.fail_per_s:
                    yield Finding.fail(where, text, observed, f"< {params.fail_per_s}/s",
                                       Action.REBOOT)
                else:
                    yield Finding.warn(where, text, observed, f"<= {params.warn_per_s}/s",
                                       Action.INVESTIGATE)
        if not bad:
            if judged_counters:
                yield Finding.passed(component, "NVLink-C2C error counters within limits",
                                     f"{judged_counters} counters over {round(dt, 1)} s")
            else:
                yield Finding.skip(component, "no C2C error counters in both samples "
                                              "(NVML 575 or later reports them)",
                                   {k: v for k, v in gpu.unsupported.items()
                                    if k.startswith("c2c_links.")} or None)
