"""NVLink checks: links up, GPU-pair reachability, link endpoints, error rates, version;
and the NVSwitch chips of the board (count on PCI, SXid errors in the kernel log).

The NVLink checks judge what NVML reported per GPU and per link. A GPU without NVLink
(a PCIe card, or a profile that expects none) skips every one of them: an NVLink verdict
on a PCIe GPU is the false positive users complain about most (DCGM #49, NVSentinel
#1481). A GPU in MIG mode skips too: MIG turns GPU peer-to-peer off, NVLink included.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from itertools import combinations
from typing import Any

from ..agent.model import Snapshot
from ..agent.model.gpu import Gpu, NvLink, NvmlInfo
from ..agent.model.kernel import SxidEvent
from ..agent.model.pci import unidentified
from .finding import Action, Finding, Status
from .profile import Profile
from .rates import DEFAULT_MIN_EVENTS, counter_rate, sample_interval
from .registry import CheckContext, check
from .window import NVLINK_WINDOW_COUNTERS, window_base
from .xid_catalog import sxid_info

NODE = "node"

# NVML_NVLINK_VERSION_*: the enum value is not the generation (hardware.md §1.10).
NVLINK_VERSION_NAMES = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0",
                        8: "6.0"}


# -- shared helpers (fabric.py uses them too) ------------------------------------------


def gpu_component(gpu: Gpu) -> str:
    return f"gpu{gpu.index}"


def error_finding(component: str, message: str, observed: Any = None) -> Finding:
    """The check could not tell: the evidence was missing or unreadable."""
    return Finding(Status.ERROR, component, message, observed=observed,
                   action=Action.INVESTIGATE)


def nvml_info(snapshot: Snapshot) -> NvmlInfo | Finding:
    """The NVML part of the snapshot, or the error finding saying why there is none."""
    nvml = snapshot.nvml
    if nvml is None:
        stats = snapshot.sources.get("nvml")
        return error_finding(NODE, "NVML data was not collected",
                             stats.error or stats.status if stats else None)
    if nvml.library_error is not None:
        return error_finding(NODE, "NVML unavailable", nvml.library_error)
    return nvml


def answering(gpu: Gpu) -> bool:
    return gpu.responsive and gpu.lost is None


def links_text(links: Iterable[int]) -> str:
    """``[0, 1, 2, 3, 7]`` -> ``"0-3, 7"``."""
    ordered = sorted(set(links))
    parts: list[str] = []
    start = prev = None
    for link in [*ordered, None]:
        if start is not None and prev is not None and link == prev + 1:
            prev = link
            continue
        if start is not None and prev is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = link
    return ", ".join(parts)


def _version_text(version: int) -> str:
    name = NVLINK_VERSION_NAMES.get(version)
    return f"{version} (NVLink {name})" if name else str(version)


_NO_NVLINK = "NVLink not supported on this GPU"


def _nvlink_gpus(ctx: CheckContext) -> tuple[list[Finding], list[Gpu]]:
    """The GPUs an NVLink check judges, and the skip/error findings for the rest.

    In order: a profile without NVLink skips the whole check; no NVML data is an error;
    then per GPU, one that did not answer (``gpu.responsive`` judges it), one whose NVML
    says NVLink is not supported, and one in MIG mode each skip.
    """
    if ctx.profile.nvlinks_per_gpu <= 0:
        return [Finding.skip(NODE, "no NVLink on this platform (profile expects none)")], []
    nvml = nvml_info(ctx.snapshot)
    if isinstance(nvml, Finding):
        return [nvml], []
    if not nvml.gpus:
        return [Finding.skip(NODE, "no GPUs seen by NVML")], []
    findings: list[Finding] = []
    judged: list[Gpu] = []
    for gpu in nvml.gpus:
        component = gpu_component(gpu)
        if not answering(gpu):
            findings.append(Finding.skip(component, "GPU did not answer NVML "
                                                    "(gpu.responsive reports it)"))
        elif "nvlink" in gpu.unsupported:
            findings.append(Finding.skip(component, _NO_NVLINK))
        elif gpu.mig_enabled:
            findings.append(Finding.skip(component, "MIG mode is enabled: GPU peer-to-peer "
                                                    "over NVLink is off"))
        else:
            judged.append(gpu)
    if not judged and findings and all(f.message == _NO_NVLINK for f in findings):
        return [Finding.skip(NODE, _NO_NVLINK)], []  # one line, not one per GPU
    return findings, judged


def _link_errors(gpu: Gpu) -> dict[str, str]:
    return {k: v for k, v in gpu.errors.items()
            if k.startswith("nvlink") or k in ("fields", "nvlink_fields", "nvlink_count")}


# -- nvlink.links_up -------------------------------------------------------------------


@check("nvlink.links_up", needs=("nvml",),
       remedy="Reset the GPU (nvidia-smi -r -i N, with no process on it; on NVSwitch boards "
              "Fabric Manager retrains its links) and run the check again. When every GPU "
              "lost links at once, suspect the NVSwitch side or Fabric Manager and reboot "
              "the node. A link that stays down after a reset and a reboot is hardware: "
              "run the field diagnostics and open an RMA.",
       actions=(Action.RESET_GPU, Action.REBOOT))
def links_up(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU has all its NVLinks active (18 on H100/H200/B200/GB200, 12 on A100).

    Counts the links NVML reports active per GPU against the profile's ``nvlinks_per_gpu``
    and names the links that are down (or missing) in ``observed``, as ``16/18 (down: 7,
    12)``. One finding per GPU, so a drain reason reads ``nvlink.links_up gpu3 16/18``.
    A GPU with a link down is a GPU reset (NVIDIA's resolution for the link-training
    failures Xid 74/136 is RESET_GPU); when every GPU of the node lost links at once the
    cause is shared (NVSwitch, Fabric Manager) and the action is a reboot.
    """
    findings, judged = _nvlink_gpus(ctx)
    yield from findings
    expected = ctx.profile.nvlinks_per_gpu
    verdicts: list[tuple[Gpu, str, list[int]]] = []
    for gpu in judged:
        component = gpu_component(gpu)
        if not gpu.nvlinks:
            yield error_finding(component, "NVLink states were not read", _link_errors(gpu)
                                or None)
            continue
        present = {link.link for link in gpu.nvlinks}
        up = sorted(link.link for link in gpu.nvlinks if link.active)
        unread = sorted(link.link for link in gpu.nvlinks if link.active is None)
        down = sorted({link.link for link in gpu.nvlinks if link.active is False}
                      | (set(range(expected)) - present))
        observed = f"{len(up)}/{expected}"
        if len(up) >= expected:
            yield Finding.passed(component, "all NVLinks active", observed, f"{expected}/"
                                 f"{expected}")
        elif unread and len(up) + len(unread) >= expected:
            yield error_finding(component, "NVLink state unreadable for some links",
                                {"links": links_text(unread), **_link_errors(gpu)})
        else:
            if down:
                observed += f" (down: {links_text(down)})"
            verdicts.append((gpu, observed, down))
    everywhere = len(verdicts) > 1 and len(verdicts) == len(judged)
    for gpu, observed, _ in verdicts:
        if everywhere:
            yield Finding.fail(gpu_component(gpu), "NVLinks down on every GPU", observed,
                               f"{expected}/{expected}", Action.REBOOT)
        else:
            yield Finding.fail(gpu_component(gpu), "NVLinks down", observed,
                               f"{expected}/{expected}", Action.RESET_GPU)


# -- nvlink.topology -------------------------------------------------------------------


@check("nvlink.topology", needs=("nvml",),
       remedy="A GPU pair without NVLink P2P runs NCCL over PCIe or not at all. Look at "
              "nvidia-smi topo -p2p n and nvidia-smi nvlink -s for the GPUs named; on "
              "NVSwitch boards check that Fabric Manager is running and registered every "
              "GPU (fabric.manager, fabric.state). Then reset the GPUs named or reboot.",
       actions=(Action.INVESTIGATE,))
def topology(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU pair can reach each other over NVLink (NVML P2P status, NVLink index).

    NVML's pairwise ``nvmlDeviceGetP2PStatus(..., NVLINK)`` is the same question NCCL
    and ``nvidia-smi topo -p2p n`` ask; anything but OK for any pair fails, naming the
    pairs and their status in ``observed``. GPUs that are skipped (no NVLink, MIG, not
    answering) are left out of the pairs.
    """
    findings, judged = _nvlink_gpus(ctx)
    yield from findings
    if not judged:
        return
    if len(judged) < 2:
        yield Finding.skip(NODE, "fewer than two NVLink GPUs to pair")
        return
    nvml = ctx.snapshot.nvml
    p2p = nvml.p2p_nvlink if nvml is not None else {}
    if not p2p:
        yield error_finding(NODE, "NVLink P2P status was not read")
        return
    bad: dict[str, str] = {}
    unread: dict[str, str | None] = {}
    pairs = list(combinations(sorted(gpu.index for gpu in judged), 2))
    for a, b in pairs:
        key = f"{a}-{b}"
        status = p2p.get(key, p2p.get(f"{b}-{a}"))
        if status is None or status.startswith("error"):
            unread[key] = status
        elif status != "ok":
            bad[key] = status
    if bad:
        yield Finding.fail(NODE, "GPU pairs without NVLink P2P", bad, "ok",
                           Action.INVESTIGATE)
    if unread:
        yield error_finding(NODE, "NVLink P2P status unreadable for some GPU pairs", unread)
    if not bad and not unread:
        yield Finding.passed(NODE, "every GPU pair reaches the others over NVLink",
                             f"{len(pairs)} pairs ok")


# -- nvlink.remote ---------------------------------------------------------------------


def _bdf_key(bdf: str | None) -> tuple[int, int, int] | None:
    """``00000000:3B:00.0`` and ``0000:3b:00.0`` -> (0, 0x3b, 0): NVML pads the domain
    to 8 digits in some calls and 4 in others, and remote PCI info has no function."""
    if not bdf:
        return None
    try:
        domain, bus, rest = bdf.strip().lower().split(":")
        return int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16)
    except ValueError:
        return None


@check("nvlink.remote", needs=("nvml",),
       remedy="On NVSwitch baseboards (HGX/DGX) every GPU link ends on an NVSwitch; a link "
              "that reports another endpoint points at the baseboard or Fabric Manager's "
              "view of it: compare nvidia-smi nvlink -R with the platform and open a "
              "ticket. On NVL72 trays, a link that ends elsewhere than a switch tray is a "
              "cabling fault: reseat the tray's NVLink connections (cable cartridge). On "
              "boards with direct GPU links, a link must end on another GPU of the node.",
       actions=(Action.INVESTIGATE, Action.RESEAT_CABLE))
def remote(ctx: CheckContext) -> Iterator[Finding]:
    """Each active NVLink ends where the platform says: an NVSwitch, or a local GPU.

    On NVSwitch boards (HGX/DGX A100, H100, H200, B200) every link's peer is a SWITCH
    (hardware.md §1.10); NVML's count of links to an NVSwitch (field 147) equal to the
    active links settles it without a per-link call. On NVL72 trays the peers are the
    switch trays' NVSwitches too; a GPU peer fails, an ``unknown`` peer only warns there
    (no real NVL72 capture of NVML's answer yet). On boards without NVSwitch the peer of
    every link must be a GPU of this node.
    """
    findings, judged = _nvlink_gpus(ctx)
    yield from findings
    if not judged:
        return
    profile = ctx.profile
    want_switch = profile.nvswitch or profile.nvl72
    local_gpus = {_bdf_key(g.pci_bdf) for g in (ctx.snapshot.nvml.gpus
                                                  if ctx.snapshot.nvml else [])}
    local_gpus.discard(None)
    for gpu in judged:
        yield from (_remote_switch(gpu, profile) if want_switch
                    else _remote_gpu(gpu, local_gpus))


def _remote_switch(gpu: Gpu, profile: Profile) -> Iterator[Finding]:
    component = gpu_component(gpu)
    active = [link for link in gpu.nvlinks if link.active]
    if not active:
        yield Finding.skip(component, "no active NVLinks (nvlink.links_up reports it)")
        return
    switch_links = gpu.nvswitch_link_count
    all_switch = switch_links is not None and switch_links == len(active)
    bad: list[tuple[NvLink, str]] = []
    unread: list[int] = []
    for link in active:
        kind = link.remote_type or ("switch" if all_switch else None)
        if kind is None:
            unread.append(link.link)
        elif kind != "switch":
            bad.append((link, kind))
    for link, kind in bad:
        where = f"{component}.link{link.link}"
        observed = {"remote_type": kind, "remote_bdf": link.remote_bdf}
        if profile.nvl72 and not profile.nvswitch:
            if kind == "unknown":
                yield Finding.warn(where, "NVLink endpoint unknown, not an NVSwitch",
                                   observed, "switch", Action.INVESTIGATE)
            else:
                yield Finding.fail(where, f"NVLink ends on a {kind}, not an NVSwitch",
                                   observed, "switch", Action.RESEAT_CABLE)
        else:
            yield Finding.fail(where, f"NVLink ends on a {kind}, not an NVSwitch", observed,
                               "switch", Action.INVESTIGATE)
    if unread:
        if switch_links is not None and switch_links < len(active) and not bad:
            yield Finding.fail(component, "fewer NVLinks end on an NVSwitch than are active",
                               f"{switch_links}/{len(active)}", f"{len(active)}/{len(active)}",
                               Action.INVESTIGATE)
        elif any(k.endswith("remote_type") for k in gpu.errors):
            yield error_finding(component, "NVLink endpoint type unreadable",
                                {"links": links_text(unread)})
        elif not bad:
            yield Finding.skip(component, "NVML did not report the NVLink endpoints")
    elif not bad:
        yield Finding.passed(component, "every active NVLink ends on an NVSwitch",
                             f"{len(active)} links", "switch")


def _remote_gpu(gpu: Gpu, local_gpus: set[tuple[int, int, int] | None]) -> Iterator[Finding]:
    component = gpu_component(gpu)
    active = [link for link in gpu.nvlinks if link.active]
    if not active:
        yield Finding.skip(component, "no active NVLinks (nvlink.links_up reports it)")
        return
    good = 0
    unread: list[int] = []
    for link in active:
        where = f"{component}.link{link.link}"
        observed = {"remote_type": link.remote_type, "remote_bdf": link.remote_bdf}
        if link.remote_type is None:
            unread.append(link.link)
        elif link.remote_type != "gpu":
            yield Finding.fail(where, f"NVLink ends on a {link.remote_type}, not a GPU",
                               observed, "gpu", Action.INVESTIGATE)
        elif link.remote_bdf and _bdf_key(link.remote_bdf) not in local_gpus:
            yield Finding.fail(where, "NVLink peer is not a GPU of this node", observed,
                               "a local GPU", Action.INVESTIGATE)
        else:
            good += 1
    if unread and not good:
        yield Finding.skip(component, "NVML did not report the NVLink endpoints")
    elif good == len(active):
        yield Finding.passed(component, "every active NVLink ends on a GPU of this node",
                             f"{good} links", "gpu")


# -- nvlink.error_rate -----------------------------------------------------------------

# How each generation's counters are judged (names as the NVML collector stores them).
# kind "events": fail on an increase of at least the threshold and of at least
# ``min_events``; kind "failed": fail on an increase of at least the threshold, no
# ``min_events``; kind "crc": DCGM's CRC rule (from ``min_events`` on: fail at the rate,
# warn below it); kind "warn_rate": warn when the rate passes the threshold.
_COUNTER_RULES: dict[str, tuple[str, str]] = {
    # pre-Blackwell DL counters (NVML fields 161-163)
    "replay": ("events", "replay_fail_events"),
    "recovery": ("events", "recovery_fail_events"),
    "crc": ("crc", "crc_fail_per_s"),
    # NVLink5 (fields 208, 211, 214, 215, 221)
    "recovery_failed": ("failed", "recovery_failed_fail_events"),
    "rcv_errors": ("crc", "rcv_errors_fail_per_s"),
    "local_link_integrity": ("warn_rate", "local_link_integrity_warn_per_s"),
    "symbol_errors": ("warn_rate", "symbol_errors_warn_per_s"),
}

_COUNTER_TEXT = {
    "replay": "NVLink replay errors",
    "recovery": "NVLink recoveries",
    "crc": "NVLink CRC errors",
    "recovery_failed": "NVLink failed recoveries",
    "rcv_errors": "NVLink receive errors",
    "local_link_integrity": "NVLink local link integrity errors",
    "symbol_errors": "NVLink symbol errors",
}


def _previous_gpu(previous: Snapshot, gpu: Gpu) -> Gpu | None:
    gpus = previous.nvml.gpus if previous.nvml is not None else []
    if gpu.uuid:
        for old in gpus:
            if old.uuid == gpu.uuid:
                return old
    for old in gpus:
        if old.index == gpu.index and (not gpu.uuid or not old.uuid):
            return old
    return None


@check("nvlink.error_rate", needs=("nvml",), rate=True,
       params={
           # An increase smaller than this is not a verdict: one stray count in a short
           # window is noise, whatever the counter.
           "min_events": DEFAULT_MIN_EVENTS,
           # DCGM health watch (DCGM_LIMIT_MAX_NVLINK_ERROR): any replay or recovery
           # increase in the window fails.
           "replay_fail_events": 1,
           "recovery_fail_events": 1,
           # DCGM (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR): CRC at 100/s or more fails, below
           # it warns.
           "crc_fail_per_s": 100.0,
           # NVLink5: a failed link recovery is a link that went down; one is enough and
           # min_events does not apply.
           "recovery_failed_fail_events": 1,
           # NVLink5 receive errors (packets that failed their CRC after FEC): DCGM's CRC
           # rule, fail at 100/s and warn below.
           "rcv_errors_fail_per_s": 100.0,
           # NVLink5 local link integrity errors: warn above this rate.
           "local_link_integrity_warn_per_s": 0.0,
           # Pre-FEC symbol errors are expected on PAM4 links and judged by BER, which
           # the snapshot does not carry: not judged unless a rate is configured.
           "symbol_errors_warn_per_s": None,
       },
       remedy="A link whose error counters keep growing is marginal. Reset the GPU to "
              "retrain its links and watch the counters (nvidia-smi nvlink -e). Errors that "
              "come back after a reset are hardware: on NVL72 trays reseat the tray's "
              "NVLink connections (cable cartridge); otherwise run the field diagnostics "
              "and open an RMA.",
       actions=(Action.RESET_GPU, Action.INVESTIGATE))
def error_rate(ctx: CheckContext) -> Iterator[Finding]:
    """NVLink error counters grow slowly enough, per link and per generation's counters.

    Counters only grow, so the check compares two samples (``--level full``, or the
    daemon's previous one) and judges the increase. Hopper and earlier: replay and
    recovery increases fail (DCGM's health watch), CRC errors fail at 100/s and warn
    below. Blackwell drops those counters (nvml.h: "unsupported for Blackwell+") for its
    own: a failed recovery fails at once, recoveries fail like Hopper's, receive errors
    follow the CRC rule, local-integrity errors warn, symbol errors (pre-FEC, normal on
    PAM4 links) are judged only with a configured rate. Apart from failed recoveries, an
    increase below ``min_events`` is not a verdict. A counter that went down was reset
    (GPU reset, driver reload): what it counted since is a lower bound (rates.py). In the
    agent, replays, recoveries and failed recoveries are judged over its last hour
    (checks/window.py), so a trickle of one every few minutes adds up to a verdict.
    """
    findings, judged = _nvlink_gpus(ctx)
    yield from findings
    if not judged:
        return
    previous = ctx.previous
    if previous is None:
        yield Finding.skip(NODE, "no earlier sample to compare NVLink counters with")
        return
    dt = sample_interval(previous, ctx.snapshot)
    if dt is None:
        yield error_finding(NODE, "samples out of order: cannot compute rates",
                            {"previous": previous.taken_at, "current": ctx.snapshot.taken_at})
        return
    params = ctx.params
    base = window_base(ctx)
    for gpu in judged:
        component = gpu_component(gpu)
        old = _previous_gpu(previous, gpu)
        if old is None:
            yield Finding.skip(component, "GPU not in the earlier sample")
            continue
        old_links = {link.link: link for link in old.nvlinks}
        judged_counters = 0
        bad = False
        for link in gpu.nvlinks:
            before = old_links.get(link.link)
            if before is None:
                continue
            where = f"{component}.link{link.link}"
            for name, value in sorted(link.errors.items()):
                rule = _COUNTER_RULES.get(name)
                prev_value, seconds = before.errors.get(name), dt
                if rule is None or prev_value is None:
                    continue
                start = base.counters.get(where, {}).get(name) if base is not None and \
                    name in NVLINK_WINDOW_COUNTERS else None
                if start is not None and base is not None:  # the agent's last hour
                    prev_value, seconds = start, base.seconds
                verdict = _judge_counter(name, rule, prev_value, value, seconds, params)
                if verdict is None:
                    continue
                judged_counters += 1
                status, observed, expected = verdict
                if status is Status.PASS:
                    continue
                bad = True
                text = f"{_COUNTER_TEXT[name]} increasing"
                if status is Status.FAIL:
                    yield Finding.fail(where, text, observed, expected, Action.RESET_GPU)
                else:
                    yield Finding.warn(where, text, observed, expected, Action.INVESTIGATE)
        if not bad:
            if judged_counters:
                yield Finding.passed(component, "NVLink error counters within limits",
                                     f"{judged_counters} counters over {round(dt, 1)} s")
            else:
                yield Finding.skip(component, "no NVLink error counters in both samples")


def _judge_counter(name: str, rule: tuple[str, str], prev: int, cur: int, dt: float,
                   params: Any) -> tuple[Status, dict[str, Any], str] | None:
    """(status, observed, expected) for one counter of one link; None when no verdict.

    A counter that went backwards was reset between the samples: the events since then
    (``cur``) are a lower bound, which never raises a false alarm (rates.py).
    """
    rate = counter_rate(prev, cur, dt)
    if rate is None:
        return None
    kind, key = rule
    threshold = params.get(key)
    min_events = int(params.get("min_events", DEFAULT_MIN_EVENTS))
    observed: dict[str, Any] = {"counter": name, **rate.to_dict(),
                                "per_s": round(rate.per_s, 3)}
    if threshold is None:
        return Status.PASS, observed, "not judged"
    if kind == "failed":
        failing = rate.events >= int(threshold)
        return (Status.FAIL if failing else Status.PASS), observed, f"< {threshold} events"
    if kind == "events":
        need = max(int(threshold), min_events)
        return (Status.FAIL if rate.events >= need else Status.PASS), observed, \
            f"< {need} events"
    if not rate.judged(min_events):
        return Status.PASS, observed, f"< {min_events} events"
    if kind == "crc":
        failing = rate.per_s >= float(threshold)
        return (Status.FAIL if failing else Status.WARN), observed, f"< {threshold}/s"
    failing = rate.over_per_s(float(threshold), min_events)
    return (Status.WARN if failing else Status.PASS), observed, f"<= {threshold}/s"


# -- nvlink.version --------------------------------------------------------------------


@check("nvlink.version", needs=("nvml",),
       remedy="A link at another NVLink version than the platform's means a different GPU "
              "than the profile expects, or a link that trained down: check the GPU model "
              "(gpu.model) and the profile, then reset the GPU and look again.",
       actions=(Action.INVESTIGATE,))
def version(ctx: CheckContext) -> Iterator[Finding]:
    """Every active NVLink runs the platform's NVLink version (NVML version enum).

    The NVML enum is not the generation: 4 is NVLink 3 (A100), 6 NVLink 4 (H100/H200),
    7 NVLink 5 (Blackwell). The profile's ``nvlink_version`` is compared with each
    active link's; the mismatching links and versions go in ``observed``.
    """
    if ctx.profile.nvlinks_per_gpu > 0 and ctx.profile.nvlink_version is None:
        yield Finding.skip(NODE, "profile names no NVLink version")
        return
    findings, judged = _nvlink_gpus(ctx)
    yield from findings
    want = ctx.profile.nvlink_version
    for gpu in judged:
        component = gpu_component(gpu)
        seen = [(link.link, link.version) for link in gpu.nvlinks
                if link.active and link.version is not None]
        if not seen:
            yield Finding.skip(component, "NVLink version not reported for any active link")
            continue
        wrong: dict[int, list[int]] = defaultdict(list)
        for link, ver in seen:
            if ver != want:
                wrong[ver].append(link)
        if wrong:
            observed = "; ".join(f"{_version_text(ver)} on links {links_text(links)}"
                                 for ver, links in sorted(wrong.items()))
            yield Finding.fail(component, "NVLink version differs from the platform's",
                               observed, _version_text(want or 0), Action.INVESTIGATE)
        else:
            yield Finding.passed(component, "NVLink version as expected",
                                 _version_text(want or 0), _version_text(want or 0))


# -- nvswitch.count --------------------------------------------------------------------


@check("nvswitch.count", needs=("pci",),
       remedy="An NVSwitch missing from PCI stops Fabric Manager (\"detected number of "
              "NVSwitches don't match with any supported system topology\"). Power-cycle "
              "the node; a switch that stays missing is a baseboard fault (RMA). More "
              "switches than expected means the profile is wrong for this node.",
       actions=(Action.REBOOT, Action.INVESTIGATE))
def nvswitch_count(ctx: CheckContext) -> Iterator[Finding]:
    """The board's NVSwitches are all on PCI (6 on A100, 4 on H100/H200, 2 on B200).

    Counts NVIDIA PCI devices of class 0x0680 (bridge, other): the NVSwitch class. NVIDIA
    PCI bridges of class 0x0604 on GB200 trays are not switches. NVL72 compute trays
    have no NVSwitch on the tray (the switches are in the switch trays): skipped there.
    """
    profile = ctx.profile
    if profile.nvl72:
        yield Finding.skip(NODE, "NVL72 tray: the NVSwitches are in the switch trays")
        return
    if not profile.nvswitch or profile.nvswitch_count is None:
        yield Finding.skip(NODE, "no NVSwitch on this platform")
        return
    pci = ctx.snapshot.pci
    if pci is None:
        stats = ctx.snapshot.sources.get("pci") or ctx.snapshot.sources.get("sysfs")
        yield error_finding(NODE, "PCI devices were not collected",
                            stats.error or stats.status if stats else None)
        return
    found = sorted(d.bdf for d in pci if d.is_nvswitch)
    want = profile.nvswitch_count
    unread = unidentified(pci)
    if len(found) < want and unread:
        yield error_finding(NODE, "fewer NVSwitches than expected, but PCI devices could not "
                            "be identified", {"found": len(found), "unidentified": unread})
    elif len(found) < want:
        yield Finding.fail(NODE, "NVSwitches missing from PCI", len(found), want,
                           Action.REBOOT)
    elif len(found) > want:
        yield Finding.warn(NODE, "more NVSwitches on PCI than the profile expects",
                           len(found), want, Action.INVESTIGATE)
    else:
        yield Finding.passed(NODE, "NVSwitch count as expected", len(found), want)


# -- nvswitch.sxid ---------------------------------------------------------------------


def _event_time(event: SxidEvent, boot_time: float | None) -> float | None:
    """Wall time of the event: its own, or boot time plus its uptime stamp."""
    when: float | None = event.time
    uptime: float | None = event.uptime_s
    if when is None and uptime is not None and boot_time is not None:
        when = boot_time + uptime
    return when


def _continuation(message: str) -> bool:
    """The driver's ``Severity ...`` and ``Data {...}`` lines follow a fault's own line."""
    return message.startswith(("Severity", "Data"))


def _switch_component(event: SxidEvent) -> str:
    """``nvidia-nvswitch1`` -> ``nvswitch1``; the bus id when the line named no device."""
    device: str | None = event.switch_device
    bdf: str = event.pci_bdf
    return device.removeprefix("nvidia-") if device else bdf


@check("nvswitch.sxid", needs=("kernel_log",),
       params={"window_s": 7200, "repeat_thresholds": {}},
       remedy="Read the SXid in the Fabric Manager user guide (appendix D) and the FM log "
              "(/var/log/fabricmanager.log). A fatal SXid needs the GPUs and NVSwitches "
              "reset: drain the node and reboot it (20034 LTSSM Fault Up: reset the GPU "
              "on the failing link). A non-fatal SXid that keeps coming is link quality: "
              "open a ticket with the SXid lines.",
       actions=(Action.RESET_GPU, Action.REBOOT, Action.INVESTIGATE))
def sxid(ctx: CheckContext) -> Iterator[Finding]:
    """No NVSwitch SXid errors in the last ``window_s`` seconds (default 2 hours).

    Each SXid code is classified by the catalog (xid_catalog.py, from the Fabric Manager
    user guide); an unknown code warns, or fails when the driver called it ``Fatal``. The
    ``Severity`` and ``Data`` lines the driver prints after a fault are part of that
    fault, not new ones. Events without a time (a log without timestamps) are counted:
    the kernel log only reaches back to boot. One finding per switch and code.
    """
    profile = ctx.profile
    pci = ctx.snapshot.pci or []
    if profile.nvl72 and not profile.nvswitch:
        yield Finding.skip(NODE, "NVL72 tray: SXids are reported on the switch trays")
        return
    if not profile.nvswitch and not any(d.is_nvswitch for d in pci):
        yield Finding.skip(NODE, "no NVSwitch on this platform")
        return
    log = ctx.snapshot.kernel_log
    if log is None:
        stats = ctx.snapshot.sources.get("kernel_log")
        yield error_finding(NODE, "kernel log was not read",
                            stats.error or stats.status if stats else None)
        return
    if log.unknown and not log.lines_read:
        yield error_finding(NODE, "kernel log unreadable", dict(log.unknown))
        return
    now = ctx.now or ctx.snapshot.taken_at
    since = now - float(ctx.params["window_s"])
    overrides = {int(k): int(v) for k, v in (ctx.params.get("repeat_thresholds") or {}).items()}
    groups: dict[tuple[str, int], list[SxidEvent]] = defaultdict(list)
    for event in log.sxids:
        when = _event_time(event, log.boot_time)
        if when is not None and when < since:
            continue
        groups[(_switch_component(event), event.sxid)].append(event)
    if not groups:
        yield Finding.passed(NODE, "no NVSwitch SXid errors in the window", 0,
                             f"0 in {ctx.params['window_s']} s")
        return
    for (component, code), events in sorted(groups.items()):
        faults = [e for e in events if not _continuation(e.message)] or events[:1]
        count = len(faults)
        fatal = any(e.message.lower().startswith("fatal") for e in faults)
        info = sxid_info(code)
        observed = {"sxid": code, "count": count, "last": faults[-1].message}
        if info is None:
            text = f"NVSwitch SXid {code} (not in the catalog)"
            if fatal:
                yield Finding.fail(component, text, observed, "no SXid", Action.REBOOT)
            else:
                yield Finding.warn(component, text, observed, "no SXid", Action.INVESTIGATE)
            continue
        text = f"NVSwitch SXid {code} ({info.name})"
        threshold = overrides.get(code, info.repeat_threshold)
        expected = f"< {threshold} in {ctx.params['window_s']} s"
        action = Action(info.action)
        if count < threshold or info.severity == "info":
            yield Finding.passed(component, f"{text} below its threshold", observed, expected)
        elif info.severity == "fail" or fatal:
            yield Finding.fail(component, text, observed, expected,
                               action if action is not Action.NONE else Action.REBOOT)
        else:
            yield Finding.warn(component, text, observed, expected, action)


__all__ = ["error_finding", "gpu_component", "links_text", "nvml_info"]
