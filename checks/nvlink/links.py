"""Each GPU's own NVLinks: nvlink.links_up (all active) and nvlink.version (the
platform's NVLink version)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from ...agent.model.gpu import Gpu
from ...agent.model.record import record
from ..core.common import NODE, gpu_component
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check
from ..core.validation import NVLINK
from .helpers import idle_reason, link_errors, links_text, nvlink_gpus, reduced_bw_mode

# NVML_NVLINK_VERSION_*: the enum value is not the generation (nvml.h).
NVLINK_VERSION_NAMES = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0",
                        8: "6.0"}


def _version_text(version: int) -> str:
    name = NVLINK_VERSION_NAMES.get(version)
    return f"{version} (NVLink {name})" if name else str(version)


@check("nvlink.links_up", validation=NVLINK, needs=("nvml",),
       remedy="Reset the GPU (nvidia-smi -r -i N, with no process on it; on NVSwitch boards "
              "Fabric Manager retrains its links) and run the check again. When every GPU "
              "lost links at once, suspect the NVSwitch side or Fabric Manager and reboot "
              "the node. A link that stays down after a reset and a reboot is hardware: "
              "run the field diagnostics and open an RMA. Under a reduced NVLink bandwidth "
              "mode the site set, links may be off by design: set the mode back to FULL "
              "before judging a link down.",
       actions=(Action.RESET_GPU, Action.REBOOT, Action.INVESTIGATE))
def links_up(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU has all its NVLinks up (18 on H100/H200/B200/GB200, 12 on A100 and
    H100 NVL): active, or idle in a documented state.

    Counts the links NVML reports active per GPU against the profile's ``nvlinks_per_gpu``
    and names the links that are down (or missing) in ``observed``, as ``16/18 (down: 7,
    12)``. One finding per GPU, so a drain reason reads ``nvlink.links_up gpu3 16/18``.
    A GPU with a link down is a GPU reset (NVIDIA's resolution for the link-training
    failures Xid 74/136 is RESET_GPU); when every GPU of the node lost links at once the
    cause is shared (NVSwitch, Fabric Manager) and the action is a reboot.

    NVLink5 links go to sleep when idle by design: nvml.h documents the link state
    NVML_NVLINK_STATE_SLEEP ("NVLink is in sleep state"), the power state field
    NVML_FI_DEV_NVLINK_GET_POWER_STATE ("0=HIGH_SPEED 1=LOW_SPEED") and the idle period
    after which links transition to sleep (NVML_FI_DEV_NVLINK_GET_POWER_THRESHOLD, set by
    nvmlDeviceSetNvLinkDeviceLowPowerThreshold). A link asleep, with its traffic disabled
    or active in its low-speed power state counts as up and is named in the passing
    finding (helpers.idle_reason, nvlink.speed's rule too); an inactive link is down
    whatever its power state. Where the site set a reduced NVLink bandwidth mode
    (nvmlSystemGetNvlinkBwMode not FULL), links the mode turned off cannot be told from
    links that failed: the GPU warns naming the mode, never fails.
    """
    findings, judged = nvlink_gpus(ctx)
    yield from findings
    expected = ctx.profile.nvlinks_per_gpu
    mode = reduced_bw_mode(ctx)
    verdicts: list[tuple[Gpu, str]] = []
    for gpu in judged:
        component = gpu_component(gpu)
        if not gpu.nvlinks:
            yield Finding.error(component, "NVLink states were not read", link_errors(gpu)
                                or None)
            continue
        states = _link_states(gpu, expected)
        observed = f"{len(states.up) + len(states.idle)}/{expected}"
        notes = _notes(states.idle, mode)
        if len(states.up) + len(states.idle) >= expected:
            message = ("all NVLinks up, some idle" if states.idle
                       else "all NVLinks active")
            yield Finding.passed(component, message, observed + notes, f"{expected}/{expected}")
        elif states.unread and len(states.up) + len(states.idle) + len(
                states.unread) >= expected:
            yield Finding.error(component, "NVLink state unreadable for some links",
                                {"links": links_text(states.unread), **link_errors(gpu)})
        else:
            if states.down:
                observed += f" (down: {links_text(states.down)})"
            verdicts.append((gpu, observed + notes))
    everywhere = len(verdicts) > 1 and len(verdicts) == len(judged)
    for gpu, observed in verdicts:
        if mode is not None:
            yield Finding.warn(gpu_component(gpu), f"NVLinks down under the site's reduced "
                               f"NVLink bandwidth mode {mode}", observed,
                               f"{expected}/{expected}", Action.INVESTIGATE)
        elif everywhere:
            yield Finding.fail(gpu_component(gpu), "NVLinks down on every GPU", observed,
                               f"{expected}/{expected}", Action.REBOOT)
        else:
            yield Finding.fail(gpu_component(gpu), "NVLinks down", observed,
                               f"{expected}/{expected}", Action.RESET_GPU)


@record
class _LinkStates:
    """A GPU's links by state, as link numbers."""

    up: list[int]
    idle: dict[str, list[int]]  # idle (helpers.idle_reason), by why
    unread: list[int]
    down: list[int]


def _notes(idle: dict[str, list[int]], mode: str | None) -> str:
    """What the observed value adds: the idle links by why, and the mode."""
    parts = [f"{reason}: {links_text(links)}" for reason, links in sorted(idle.items())]
    if mode is not None:
        parts.append(f"NVLink bandwidth mode {mode}")
    return f" ({'; '.join(parts)})" if parts else ""


def _link_states(gpu: Gpu, expected: int) -> _LinkStates:
    """The GPU's links up, idle, unreadable and down; idle, unread and down name only the
    links the profile expects (0 to ``expected`` - 1), down those inactive or missing.

    NVML numbers a part's links from 0, and a reader that walks NVML_NVLINK_MAX_LINKS
    (18) sees a 12-link part's six unused numbers as inactive: naming those as down would
    send the operator after links the part does not have."""
    wanted = set(range(expected))
    present = {link.link for link in gpu.nvlinks}
    up: list[int] = []
    idle: dict[str, list[int]] = {}
    unread: list[int] = []
    down = wanted - present
    for link in sorted(gpu.nvlinks, key=lambda item: item.link):
        reason = idle_reason(link)
        if reason is not None:
            if link.link in wanted:
                idle.setdefault(reason, []).append(link.link)
        elif link.active:
            up.append(link.link)
        elif link.link not in wanted:
            continue
        elif link.active is None:
            unread.append(link.link)
        else:
            down.add(link.link)
    return _LinkStates(up, idle, unread, sorted(down))


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
    findings, judged = nvlink_gpus(ctx)
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
