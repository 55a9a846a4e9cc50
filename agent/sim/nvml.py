"""A pynvml stand-in driven by a SimNode.

It is a real module object carrying pynvml's own constants, structs and NVMLError
classes, so our error handling runs exactly as on hardware: a simulated "not supported"
is ``pynvml.NVMLError_NotSupported``, a field value comes back in a real
``c_nvmlFieldValue_t``. Only the functions answer from the simulated state.
"""

from __future__ import annotations

import ctypes
import signal
import threading
import time
import types
from collections.abc import Callable
from typing import Any, NoReturn

import pynvml

from .hardware import SimGpu, SimNode

NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT


class _Handle:
    """Opaque device handle, like the ``c_nvmlDevice_t`` pynvml returns."""

    def __init__(self, gpu: SimGpu) -> None:
        self.gpu = gpu


def _raise(code: int) -> NoReturn:
    raise pynvml.NVMLError(code)


def _pci_info(bdf: str, device_id: int) -> Any:
    """NVML's PCI info: pciDeviceId is the device id over NVIDIA's vendor id."""
    domain, bus, rest = bdf.split(":")
    device = rest.split(".")[0]
    info = pynvml.nvmlPciInfo_t()
    info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(device, 16)
    info.pciDeviceId = device_id << 16 | 0x10DE
    info.busId = f"{int(domain, 16):08X}:{int(bus, 16):02X}:{int(device, 16):02X}.0".encode()
    info.busIdLegacy = f"{int(domain, 16):04X}:{int(bus, 16):02X}:{int(device, 16):02X}.0".encode()
    return info


def build_module(node: SimNode) -> types.ModuleType:
    mod = types.ModuleType("clusterdiag_sim_pynvml")
    for name in dir(pynvml):
        value = getattr(pynvml, name)
        if not callable(value) or isinstance(value, type):
            setattr(mod, name, value)
    state = {"init": 0}

    def device(func: Callable[..., Any]) -> Callable[..., Any]:
        """Apply per-GPU behaviour (lost, hung, one faulty call) before answering."""
        name = func.__name__

        def wrapper(handle: _Handle, *args: Any) -> Any:
            if not state["init"]:
                _raise(pynvml.NVML_ERROR_UNINITIALIZED)
            gpu = handle.gpu
            if gpu.hang:
                threading.Event().wait()
            if gpu.lost is not None:
                _raise(gpu.lost)
            if name in gpu.call_errors:
                _raise(gpu.call_errors[name])
            return func(gpu, *args)

        wrapper.__name__ = name
        setattr(mod, name, wrapper)
        return wrapper

    def system(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(mod, func.__name__, func)
        return func

    @system
    def nvmlInit() -> None:
        if node.driver_error is not None:
            _raise(node.driver_error)
        if any(g.hang for g in node.gpus):
            # A process blocked in the driver does not die on SIGTERM either.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        state["init"] += 1

    @system
    def nvmlInitWithFlags(flags: int) -> None:
        nvmlInit()

    @system
    def nvmlShutdown() -> None:
        state["init"] = max(0, state["init"] - 1)

    def _need_init() -> None:
        if not state["init"]:
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)

    @system
    def nvmlSystemGetDriverVersion() -> str:
        _need_init()
        return node.driver_version

    @system
    def nvmlSystemGetNVMLVersion() -> str:
        _need_init()
        return f"{node.cuda_version // 1000}.{node.driver_version}"

    @system
    def nvmlSystemGetCudaDriverVersion() -> int:
        _need_init()
        return node.cuda_version

    @system
    def nvmlSystemGetCudaDriverVersion_v2() -> int:
        return nvmlSystemGetCudaDriverVersion()

    @system
    def nvmlDeviceGetCount() -> int:
        _need_init()
        return len(node.nvml_gpus)

    @system
    def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
        _need_init()
        gpus = node.nvml_gpus
        if not 0 <= index < len(gpus):
            _raise(INVALID_ARGUMENT)
        gpu = gpus[index]
        if "nvmlDeviceGetHandleByIndex" in gpu.call_errors:
            _raise(gpu.call_errors["nvmlDeviceGetHandleByIndex"])
        return _Handle(gpu)

    @system
    def nvmlDeviceGetHandleByPciBusId(bus_id: str) -> _Handle:
        _need_init()
        wanted = bus_id.lower()[-12:]
        for gpu in node.nvml_gpus:
            if gpu.bdf[-12:] == wanted:
                return _Handle(gpu)
        _raise(pynvml.NVML_ERROR_NOT_FOUND)
        raise AssertionError

    @device
    def nvmlDeviceGetIndex(gpu: SimGpu) -> int:
        return node.nvml_gpus.index(gpu)

    @device
    def nvmlDeviceGetName(gpu: SimGpu) -> str:
        return gpu.name

    @device
    def nvmlDeviceGetUUID(gpu: SimGpu) -> str:
        return gpu.uuid

    @device
    def nvmlDeviceGetSerial(gpu: SimGpu) -> str:
        return gpu.serial

    @device
    def nvmlDeviceGetPciInfo(gpu: SimGpu) -> Any:
        return _pci_info(gpu.bdf, node.layout.gpu_device_id)

    @device
    def nvmlDeviceGetBoardPartNumber(gpu: SimGpu) -> str:
        return gpu.board_part

    @device
    def nvmlDeviceGetVbiosVersion(gpu: SimGpu) -> str:
        return gpu.vbios

    @device
    def nvmlDeviceGetInforomImageVersion(gpu: SimGpu) -> str:
        return gpu.inforom

    @device
    def nvmlDeviceValidateInforom(gpu: SimGpu) -> None:
        if not gpu.inforom_valid:
            _raise(pynvml.NVML_ERROR_CORRUPTED_INFOROM)

    @device
    def nvmlDeviceGetArchitecture(gpu: SimGpu) -> int:
        return gpu.architecture

    @device
    def nvmlDeviceGetCudaComputeCapability(gpu: SimGpu) -> tuple[int, int]:
        return {7: (8, 0), 9: (9, 0), 10: (10, 0)}.get(gpu.architecture, (0, 0))

    @device
    def nvmlDeviceGetMemoryInfo(gpu: SimGpu) -> Any:
        mem = pynvml.c_nvmlMemory_t()
        mem.total = gpu.memory_bytes
        mem.used = sum(p[1] for p in gpu.processes)
        mem.free = mem.total - mem.used
        return mem

    @device
    def nvmlDeviceGetMinorNumber(gpu: SimGpu) -> int:
        return gpu.index

    @device
    def nvmlDeviceGetTemperature(gpu: SimGpu, sensor: int) -> int:
        return gpu.temperature

    @device
    def nvmlDeviceGetTemperatureThreshold(gpu: SimGpu, kind: int) -> int:
        return {0: gpu.shutdown_temp, 1: gpu.slowdown_temp}.get(kind) or _raise(NOT_SUPPORTED)

    @device
    def nvmlDeviceGetCurrentClocksEventReasons(gpu: SimGpu) -> int:
        return gpu.clock_reasons

    @device
    def nvmlDeviceGetCurrentClocksThrottleReasons(gpu: SimGpu) -> int:
        return gpu.clock_reasons

    @device
    def nvmlDeviceGetClockInfo(gpu: SimGpu, clock: int) -> int:
        return gpu.sm_clock

    @device
    def nvmlDeviceGetMaxClockInfo(gpu: SimGpu, clock: int) -> int:
        return gpu.sm_clock_max

    @device
    def nvmlDeviceGetPerformanceState(gpu: SimGpu) -> int:
        return gpu.pstate

    @device
    def nvmlDeviceGetCurrPcieLinkGeneration(gpu: SimGpu) -> int:
        return gpu.pcie_gen

    @device
    def nvmlDeviceGetCurrPcieLinkWidth(gpu: SimGpu) -> int:
        return gpu.pcie_width

    @device
    def nvmlDeviceGetMaxPcieLinkGeneration(gpu: SimGpu) -> int:
        return node.profile.gpu_pcie_gen or gpu.pcie_gen

    @device
    def nvmlDeviceGetMaxPcieLinkWidth(gpu: SimGpu) -> int:
        return node.profile.gpu_pcie_width or 16

    @device
    def nvmlDeviceGetPcieReplayCounter(gpu: SimGpu) -> int:
        return _field(gpu, 94)

    @device
    def nvmlDeviceGetPersistenceMode(gpu: SimGpu) -> int:
        return gpu.persistence

    @device
    def nvmlDeviceGetMigMode(gpu: SimGpu) -> list[int]:
        if gpu.architecture < 7:
            _raise(NOT_SUPPORTED)
        return list(gpu.mig)

    @device
    def nvmlDeviceGetComputeRunningProcesses(gpu: SimGpu) -> list[Any]:
        procs = []
        for pid, used in gpu.processes:
            proc = pynvml.c_nvmlProcessInfo_v3_t()
            proc.pid, proc.usedGpuMemory = pid, used
            proc.gpuInstanceId = proc.computeInstanceId = 0xFFFFFFFF
            procs.append(pynvml.nvmlStructToFriendlyObject(proc))
        return procs

    @system
    def nvmlSystemGetProcessName(pid: int) -> str:
        return node.proc_names.get(pid) or _raise(pynvml.NVML_ERROR_NOT_FOUND)

    @device
    def nvmlDeviceGetRowRemapperHistogram(gpu: SimGpu) -> Any:
        if gpu.mig[0]:
            _raise(NOT_SUPPORTED)
        hist = pynvml.c_nvmlRowRemapperHistogramValues()
        for key, value in gpu.histogram.items():
            setattr(hist, key, value)
        return hist

    @device
    def nvmlDeviceGetRemappedRows(gpu: SimGpu) -> tuple[int, int, int, int]:
        if gpu.mig[0]:
            _raise(NOT_SUPPORTED)
        return (_field(gpu, 142), _field(gpu, 143), _field(gpu, 144), _field(gpu, 145))

    @device
    def nvmlDeviceGetGpuFabricInfoV(gpu: SimGpu, ref: Any) -> int:
        if gpu.fabric is None:
            _raise(NOT_SUPPORTED)
        info = ref._obj
        fab = gpu.fabric
        ctypes.memmove(info.clusterUuid, fab.cluster_uuid, 16)
        info.status, info.cliqueId, info.state = fab.status, fab.clique_id, fab.state
        info.healthMask = fab.health_mask
        if hasattr(info, "healthSummary"):
            info.healthSummary = fab.health_summary
        return pynvml.NVML_SUCCESS

    @device
    def nvmlDeviceGetSramEccErrorStatus(gpu: SimGpu, ref: Any) -> int:
        ref._obj.bThresholdExceeded = gpu.sram_exceeded
        return pynvml.NVML_SUCCESS

    @device
    def nvmlDeviceGetUnrepairableMemoryFlag_v1(gpu: SimGpu) -> int:
        return gpu.unrepairable

    @device
    def nvmlDeviceGetPlatformInfo(gpu: SimGpu, ref: Any) -> int:
        if not node.profile.nvl72:
            _raise(NOT_SUPPORTED)
        info = ref._obj
        info.chassisSerialNumber = b"1821225000001"
        raw = (ctypes.c_char * 5).from_buffer(info, type(info).slotNumber.offset)
        tray = int("".join(c for c in node.name[-2:] if c.isdigit()) or 0)
        ctypes.memmove(raw, bytes([tray, tray, 0, 0, gpu.index + 1]), 5)
        return pynvml.NVML_SUCCESS

    @device
    def nvmlDeviceGetPowerUsage(gpu: SimGpu) -> int:
        return int(_field(gpu, 185))

    @device
    def nvmlDeviceGetEnforcedPowerLimit(gpu: SimGpu) -> int:
        return int(_field(gpu, 190))

    @device
    def nvmlDeviceGetPowerManagementLimit(gpu: SimGpu) -> int:
        return int(_field(gpu, 190))

    @device
    def nvmlDeviceGetPowerManagementDefaultLimit(gpu: SimGpu) -> int:
        return int(_field(gpu, 189))

    @device
    def nvmlDeviceGetEccMode(gpu: SimGpu) -> list[int]:
        return [int(_field(gpu, 1)), int(_field(gpu, 2))]

    def _field(gpu: SimGpu, fid: int, scope: int | None = None) -> Any:
        if scope is not None:
            if gpu.mig[0] or scope >= len(gpu.links):
                _raise(NOT_SUPPORTED if gpu.mig[0] else INVALID_ARGUMENT)
            link = gpu.links[scope]
            per_link: dict[int, Any] = {165: link.state, 166: link.version,
                                        164: link.speed_mbps}
            if fid in per_link:
                return per_link[fid]
            if fid in link.errors:
                return link.errors[fid].value(node.epoch)
            _raise(NOT_SUPPORTED)
        if fid in gpu.counters:
            return gpu.counters[fid].value(node.epoch)
        if gpu.mig[0] and fid in (91, 147, 142, 143, 144, 145):
            _raise(NOT_SUPPORTED)
        value = gpu.fields.get(fid)
        if value is None:
            _raise(NOT_SUPPORTED)
        return value

    @device
    def nvmlDeviceGetFieldValues(gpu: SimGpu, field_ids: list[Any]) -> Any:
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for i, spec in enumerate(field_ids):
            fid, scope = spec if isinstance(spec, tuple) else (spec, None)
            entry = values[i]
            entry.fieldId, entry.scopeId = fid, scope or 0
            try:
                value = _field(gpu, fid, scope)
            except pynvml.NVMLError as exc:
                entry.nvmlReturn = exc.value
                continue
            entry.nvmlReturn = 0
            if isinstance(value, float):
                entry.valueType, entry.value.dVal = pynvml.NVML_VALUE_TYPE_DOUBLE, value
            else:
                entry.valueType = pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                entry.value.ullVal = int(value)
        return values

    def _link(gpu: SimGpu, link: int) -> Any:
        if gpu.mig[0] or not gpu.links:
            _raise(NOT_SUPPORTED)
        if not 0 <= link < len(gpu.links):
            _raise(INVALID_ARGUMENT)
        return gpu.links[link]

    @device
    def nvmlDeviceGetNvLinkState(gpu: SimGpu, link: int) -> int:
        return int(_link(gpu, link).state)

    @device
    def nvmlDeviceGetNvLinkVersion(gpu: SimGpu, link: int) -> int:
        return int(_link(gpu, link).version)

    @device
    def nvmlDeviceGetNvLinkRemoteDeviceType(gpu: SimGpu, link: int) -> int:
        return int(_link(gpu, link).remote_type)

    @device
    def nvmlDeviceGetNvLinkRemotePciInfo(gpu: SimGpu, link: int) -> Any:
        remote = _link(gpu, link).remote_bdf
        if not remote:
            _raise(NOT_SUPPORTED)
        return _pci_info(remote, node.layout.nvswitch_device_id)

    @device
    def nvmlDeviceGetNvLinkErrorCounter(gpu: SimGpu, link: int, counter: int) -> int:
        fid = {0: 161, 1: 162, 2: 163}.get(counter)
        lnk = _link(gpu, link)
        if fid is None or fid not in lnk.errors:
            _raise(NOT_SUPPORTED)
        return lnk.errors[fid].value(node.epoch)

    @device
    def nvmlDeviceGetP2PStatus(gpu: SimGpu, other: _Handle, index: int) -> int:
        if not gpu.links:
            return int(pynvml.NVML_P2P_STATUS_NOT_SUPPORTED)
        a, b = sorted((gpu.index, other.gpu.index))
        return node.p2p.get((a, b), int(pynvml.NVML_P2P_STATUS_NOT_SUPPORTED))

    @device
    def nvmlDeviceGetTopologyCommonAncestor(gpu: SimGpu, other: _Handle) -> int:
        same_numa = gpu.numa == other.gpu.numa
        return int(pynvml.NVML_TOPOLOGY_NODE if same_numa else pynvml.NVML_TOPOLOGY_SYSTEM)

    @device
    def nvmlDeviceGetSupportedEventTypes(gpu: SimGpu) -> int:
        return int(pynvml.nvmlEventTypeXidCriticalError)

    _add_events(mod, node, state)
    return mod


class _EventSet:
    """Which GPUs registered for XID events, and how many scheduled events it delivered."""

    def __init__(self) -> None:
        self.gpus: set[int] = set()
        self.delivered: set[int] = set()


def _add_events(mod: types.ModuleType, node: SimNode, state: dict[str, int]) -> None:
    """nvmlEventSetWait delivers the node's ``xid_schedule`` as real NVML does: each event
    once per event set, blocking up to the timeout, NVML_ERROR_TIMEOUT when none is due."""

    def nvmlEventSetCreate() -> _EventSet:
        if not state["init"]:
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)
        return _EventSet()

    def nvmlDeviceRegisterEvents(handle: _Handle, types_mask: int, event_set: _EventSet) -> None:
        if handle.gpu.lost is not None:
            _raise(handle.gpu.lost)
        if types_mask & pynvml.nvmlEventTypeXidCriticalError:
            event_set.gpus.add(handle.gpu.index)

    def nvmlEventSetWait_v2(event_set: _EventSet, timeout_ms: int) -> Any:
        limit = time.time() + timeout_ms / 1000.0
        pending = sorted((node.epoch + at, n) for n, (at, gpu, _) in enumerate(node.xid_schedule)
                         if gpu in event_set.gpus and n not in event_set.delivered)
        if not pending or pending[0][0] > limit:
            time.sleep(max(0.0, limit - time.time()))
            _raise(pynvml.NVML_ERROR_TIMEOUT)
        due, n = pending[0]
        time.sleep(max(0.0, due - time.time()))
        event_set.delivered.add(n)
        _, index, code = node.xid_schedule[n]
        gpu = next(g for g in node.gpus if g.index == index)
        return types.SimpleNamespace(device=_Handle(gpu), eventType=int(
            pynvml.nvmlEventTypeXidCriticalError), eventData=code, gpuInstanceId=0xFFFFFFFF,
            computeInstanceId=0xFFFFFFFF)

    def nvmlEventSetFree(event_set: _EventSet) -> None:
        event_set.gpus.clear()

    for func in (nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2,
                 nvmlEventSetFree):
        setattr(mod, func.__name__, func)
    setattr(mod, "nvmlEventSetWait", nvmlEventSetWait_v2)  # noqa: B010 - a module attribute
