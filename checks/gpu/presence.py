"""Whether the GPUs are there and answer: gpu.responsive (NVML answers, per GPU and
for the driver) and gpu.count (the profile, PCI and NVML agree on how many)."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

from ...agent.model.gpu import Gpu, NvmlInfo
from ...agent.model.pci import PciDevice, normalize_bdf, unidentified
from ..core.common import NODE, gpu_component, nvml_usable
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check

# --- gpu.responsive --------------------------------------------------------------------

_LIBRARY_HINTS = {
    "LibraryNotFound": "libnvidia-ml.so.1 not found",
    "DriverNotLoaded": "NVIDIA kernel module not loaded",
    "LibRmVersionMismatch": "driver library and kernel module versions differ",
}

# nvmlInit's NO_PERMISSION: the GPU device files would not open for us. Under the agent's
# unit that is its device policy (systemd/clusterdiag-agent.service; docs/agent.md, "Device
# policy"): /proc/devices names their group "nvidia" from driver 550.40 and
# "nvidia-frontend" before, and a DeviceAllow= for only one of them denies every GPU on
# the other. Elsewhere it is the files' mode or group. Ours to fix either way, never the GPU's.
_DENIED_FIX = ("under clusterdiag-agent.service, DeviceAllow= must name the loaded "
               "driver's group (char-nvidia from driver 550.40, char-nvidia-frontend "
               "before); elsewhere check the files' mode and group")
_DENIED = ("no permission to open the GPU devices (/dev/nvidiactl, /dev/nvidia0...): "
           + _DENIED_FIX)

# What an NVML error from ONE call says is at fault, by NVIDIA's nvmlReturn_t reference
# (https://docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html):
# - the GPU: GPU_IS_LOST ("has fallen off the bus or has otherwise become inaccessible"),
#   RESET_REQUIRED, TIMEOUT, IRQ_ISSUE ("interrupt issue with a GPU"), CORRUPTED_INFOROM,
#   UNKNOWN ("an internal driver error"): a fail, as is any code we cannot name.
# - the driver: DRIVER_NOT_LOADED, LIB_RM_VERSION_MISMATCH ("RM detects a driver/library
#   version mismatch"), LIBRARY_NOT_FOUND: no CUDA runs on this node either, so a fail.
# - the call, the library or the host, never the GPU: the names below. A reboot drains a
#   healthy node for them; the finding is an error naming the call instead.
CALL_FAULTS = frozenset({
    "Uninitialized",          # UNINITIALIZED: "NVML was not first initialized"
    "InvalidArgument",        # INVALID_ARGUMENT: "A supplied argument is invalid"
    "NotSupported",           # NOT_SUPPORTED: "not available on target device"
    "NoPermission",           # NO_PERMISSION: "user does not have permission"
    "NotFound",               # NOT_FOUND: "A query to find an object was unsuccessful"
    "InsufficientSize",       # INSUFFICIENT_SIZE: "An input argument is not large enough"
    "FunctionNotFound",       # FUNCTION_NOT_FOUND: "Local version of NVML doesn't implement"
    "OperatingSystem",        # OPERATING_SYSTEM: "blocked by the operating system/cgroups"
    "InUse",                  # IN_USE: "the GPU is currently in use" (by an operation)
    "Memory",                 # MEMORY: "Insufficient memory" (host memory)
    "NoData",                 # NO_DATA: "No data"
    "InsufficientResources",  # INSUFFICIENT_RESOURCES: "critical resources, other than memory"
    "ArgumentVersionMismatch",  # ARGUMENT_VERSION_MISMATCH: "version is invalid/unsupported"
    "Deprecated",             # DEPRECATED: "The requested functionality has been deprecated"
    "NotReady",               # NOT_READY: "The system is not ready for the request"
    "NVMLLibraryMismatchError",  # pynvml: the bindings and the library disagree
    "unexpected answer",      # the bindings answered in a type the model cannot hold
})


def _error_name(reason: str) -> str:
    """``InvalidArgument: nvmlDeviceGetTemperature: Invalid Argument`` -> ``InvalidArgument``:
    the collector leads each reason with the NVML error's name."""
    return reason.split(":", 1)[0].strip()


def _call_fault(reason: str) -> bool:
    """Whether one call's error blames the call, the library or the host, not the GPU."""
    return _error_name(reason) in CALL_FAULTS


def _call_name(key: str, reason: str) -> str:
    """The NVML function that failed where the collector recorded it (``InvalidArgument:
    nvmlDeviceGetTemperature: ...``), else the value it was reading."""
    parts = reason.split(": ", 2)
    return parts[1] if len(parts) > 2 and parts[1].startswith("nvml") else key


def _call_errors(component: str, errors: dict[str, str]) -> Finding:
    """An error, not a fail: the GPU answered; one call's library or host trouble is no
    reason to drain or reboot a node jobs can use."""
    named = ", ".join(f"{_call_name(key, reason)} returned {_error_name(reason)}"
                      for key, reason in sorted(errors.items()))
    return Finding.error(component, f"NVML call failed (library or host, not the GPU): "
                                    f"{named}", errors)


@check("gpu.responsive", needs=("nvml", "pci"),
       remedy="A GPU that fell off the bus (GpuIsLost, Xid 79) or does not answer NVML "
              "needs a node reboot; ResetRequired needs `nvidia-smi -r -i N` (no processes "
              "on it) or a reboot. GPUs on PCI with no working driver: reinstall or reload "
              "the driver (a library/kernel-module version mismatch after an upgrade needs "
              "a reboot). If it comes back after a reboot, repeat offenders go to RMA. One "
              "call's library or host error (InvalidArgument, Memory, ...) is an error, "
              "not a fault of the GPU: check the NVML bindings, the driver version and the "
              "host's memory; no reboot.",
       actions=(Action.REBOOT, Action.RESET_GPU, Action.FIX_CONFIG, Action.INVESTIGATE))
def responsive(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU answers NVML, and the driver answers at all where PCI shows GPUs.

    A GPU that does not answer within the deadline is a fail, never a hang (docs/design.md §1),
    unless the miss was our own deadline (a starved or budget-less reader, see
    agent/collectors/nvml_budget.py): that is an error naming the budget, never a reboot.
    With no working NVML, PCI decides: GPUs there mean the driver is broken (fail),
    none means this is not a GPU node (skip). An error of one call that blames the call,
    the library or the host (``CALL_FAULTS``) is an error: the GPU is not at fault.
    """
    snap = ctx.snapshot
    nvml = snap.nvml
    pci_gpus = [d for d in snap.pci or [] if d.is_nvidia_gpu]
    if nvml is None or nvml.library_error:
        error = nvml.library_error if nvml is not None else "not collected"
        observed: dict[str, Any] = {"error": error,
                                    "message": nvml.library_message if nvml else None}
        if error == "NoPermission":
            yield Finding.error(NODE, _DENIED, observed)
        elif nvml is not None and "devices" in nvml.errors:
            observed["devices"] = nvml.errors["devices"]
            # nvmlInit's "Unknown Error" under a device cgroup that denies the GPUs
            # (agent/collectors/nvml.py denied_devices): our confinement, not the GPU
            yield Finding.error(NODE, f"NVML failed ({error}) and a GPU device would not "
                                      f"open for us ({nvml.errors['devices']}): "
                                      + _DENIED_FIX, observed)
        elif pci_gpus:
            observed["pci_gpus"] = [d.bdf for d in pci_gpus]
            if error == "LibraryNotFound":
                yield Finding.fail(NODE, "NVIDIA GPUs on PCI but no NVIDIA driver library",
                                   observed, "libnvidia-ml.so.1", Action.FIX_CONFIG)
            else:
                yield Finding.fail(NODE, "NVIDIA GPUs on PCI but the driver does not answer",
                                   observed, "NVML initialised", Action.REBOOT)
        elif snap.pci is None:
            yield Finding.error(NODE, "NVML unavailable and PCI not read: cannot tell "
                                      "whether GPUs are present", observed)
        else:
            hint = _LIBRARY_HINTS.get(str(error), str(error))
            yield Finding.skip(NODE, f"no NVIDIA GPU on this node (PCI) and no driver ({hint})",
                               observed)
        return
    if "deadline" in nvml.errors:
        yield Finding.error(NODE, "NVML not judged: no answer within clusterdiag's own budget",
                            nvml.errors["deadline"])
        return
    if "init" in nvml.errors:
        yield Finding.fail(NODE, "NVML did not initialise within the deadline",
                           nvml.errors["init"], "NVML answers", Action.REBOOT)
        return
    if "worker" in nvml.errors:
        yield Finding.error(NODE, "NVML reader crashed", nvml.errors["worker"])
    if "device_count" in nvml.errors and _call_fault(nvml.errors["device_count"]):
        yield _call_errors(NODE, {"device_count": nvml.errors["device_count"]})
    elif "device_count" in nvml.errors:
        yield Finding.fail(NODE, "NVML could not count the GPUs", nvml.errors["device_count"],
                           "a GPU count", Action.REBOOT)
    seen: set[int] = set()
    for gpu in nvml.gpus:
        seen.add(gpu.index)
        yield _responsive_gpu(gpu, gpu.index in nvml.unanswered)
    for index in sorted(set(nvml.unanswered) - seen):
        yield Finding.fail(f"gpu{index}", "GPU did not answer NVML within the deadline",
                           "timeout", "an answer", Action.REBOOT)
    if not seen and not nvml.unanswered:
        yield Finding.skip(NODE, "NVML enumerates no GPU (see gpu.count)",
                           {"device_count": nvml.device_count})


def _responsive_gpu(gpu: Gpu, unanswered: bool) -> Finding:
    comp = gpu_component(gpu)
    if gpu.lost == "GpuIsLost":
        return Finding.fail(comp, "GPU has fallen off the bus (GpuIsLost)", gpu.lost,
                            "answers NVML", Action.REBOOT)
    if gpu.lost == "ResetRequired":
        return Finding.fail(comp, "GPU requires a reset (ResetRequired)", gpu.lost,
                            "answers NVML", Action.RESET_GPU)
    if (unanswered or gpu.lost == "timeout") and "deadline" in gpu.errors:
        return Finding.error(comp, "GPU not judged: no answer within clusterdiag's own budget",
                             gpu.errors["deadline"])
    if unanswered or gpu.lost == "timeout":
        return Finding.fail(comp, "GPU did not answer NVML within the deadline", "timeout",
                            "an answer", Action.REBOOT)
    if gpu.lost:
        return Finding.fail(comp, "GPU not answering NVML", gpu.lost, "answers NVML",
                            Action.REBOOT)
    if "handle" in gpu.unsupported:
        return Finding.skip(comp, "GPU not accessible to clusterdiag", gpu.unsupported["handle"])
    if "handle" in gpu.errors:
        reason = gpu.errors["handle"]
        if reason.startswith("InsufficientPower"):
            return Finding.fail(comp, "GPU reports insufficient power (check power cables)",
                                reason, "answers NVML", Action.INVESTIGATE)
        if _call_fault(reason):
            return _call_errors(comp, {"handle": reason})
        return Finding.fail(comp, "GPU could not be opened by NVML", reason, "answers NVML",
                            Action.REBOOT)
    errors = {k: v for k, v in gpu.errors.items() if not k.startswith(_OTHER_FAMILIES)}
    ours = errors.get("reader")
    if ours is not None and not ours.startswith("NVMLError"):
        # our reader's own exception (a TypeError, a KeyError): nothing NVML said
        return Finding.error(comp, "clusterdiag's NVML reader failed on this GPU (our bug, "
                                   "not the GPU's)", errors)
    if any(not _call_fault(reason) for reason in errors.values()):
        # A failure that blames the GPU (Unknown, Timeout, ...) on a GPU that still has a
        # handle: the driver and the GPU disagree; the per-value checks skip.
        return Finding.fail(comp, "NVML calls fail on this GPU", errors, "no NVML errors",
                            Action.REBOOT)
    if errors:
        return _call_errors(comp, errors)
    return Finding.passed(comp, "GPU answers NVML")


# Read errors the nvlink, fabric and c2c checks judge (per-link fields, fabric info).
_OTHER_FAMILIES = ("nvlink", "fabric", "platform", "c2c")

# --- gpu.count, gpu.model ------------------------------------------------------------


@check("gpu.count", needs=("nvml", "pci"),
       remedy="A GPU missing from NVML but present on PCI is usually wedged: reboot. One "
              "missing from PCI too has fallen off the bus or lost power/seating: reboot, "
              "then have it inspected. More GPUs than expected means the node has the "
              "wrong profile.",
       actions=(Action.REBOOT, Action.FIX_CONFIG))
def count(ctx: CheckContext) -> Iterator[Finding]:
    """The profile's GPU count, the NVIDIA GPUs on PCI and the GPUs NVML enumerates agree.

    PCI (sysfs) is the ground truth a driver cannot hide; a bus id present there but not
    in NVML names the GPU the driver lost.
    """
    snap, expected = ctx.snapshot, ctx.profile.gpu_count
    nvml = snap.nvml
    pci = None if snap.pci is None else [d for d in snap.pci if d.is_nvidia_gpu]
    usable = nvml_usable(nvml)
    nvml_count = None
    if usable and nvml is not None:
        nvml_count = nvml.device_count if nvml.device_count is not None else len(nvml.gpus)
    observed = {"pci": None if pci is None else len(pci), "nvml": nvml_count}
    if pci is None and nvml_count is None:
        yield Finding.error(NODE, "neither PCI nor NVML could count the GPUs", observed)
        return
    if not pci and not nvml_count and not expected:
        yield Finding.skip(NODE, "no NVIDIA GPU on this node", observed)
        return
    problems = 0
    if pci is not None and nvml_count is not None and nvml is not None:
        problems += yield from _missing_from_nvml(pci, nvml, nvml_count)
    seen = len(pci) if pci is not None else nvml_count
    unread = unidentified(snap.pci)
    if expected is not None and seen is not None:
        if seen < expected and unread:
            problems += 1
            yield Finding.error(NODE, "fewer GPUs than expected, but PCI devices could not be "
                                "identified", {**observed, "unidentified": unread})
        elif seen < expected:
            problems += 1
            yield Finding.fail(NODE, "fewer GPUs than the profile expects", observed, expected,
                               Action.REBOOT)
        elif seen > expected:
            problems += 1
            yield Finding.warn(NODE, "more GPUs than the profile expects", observed, expected,
                               Action.FIX_CONFIG)
    if problems:
        return
    if expected is None:
        yield Finding.skip(NODE, "no GPU count in the profile (PCI and NVML agree)", observed)
    else:
        yield Finding.passed(NODE, "GPU count as expected", observed, expected)


def _missing_from_nvml(pci: list[PciDevice], nvml: NvmlInfo,
                       nvml_count: int) -> Generator[Finding, None, int]:
    """Fail per PCI GPU that NVML does not enumerate; the generator returns the count."""
    bus_ids = [normalize_bdf(g.pci_bdf) for g in nvml.gpus]
    found = 0
    if bus_ids and all(bus_ids) and len(bus_ids) >= nvml_count:
        for dev in pci:
            if normalize_bdf(dev.bdf) not in bus_ids:
                found += 1
                yield Finding.fail(NODE, "GPU on PCI but not enumerated by NVML",
                                   {"bus_id": dev.bdf, "driver": dev.driver},
                                   "enumerated by NVML", Action.REBOOT)
    elif nvml_count < len(pci):
        found += 1
        yield Finding.fail(NODE, "fewer GPUs in NVML than on PCI",
                           {"pci": [d.bdf for d in pci], "nvml": nvml_count}, len(pci),
                           Action.REBOOT)
    return found
