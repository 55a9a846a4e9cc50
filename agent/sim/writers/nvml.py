"""A pynvml stand-in driven by a SimNode: ``SimNvml``, one method per NVML function.

It answers with pynvml's own constants, structs and NVMLError classes, so our error
handling runs exactly as on hardware: a simulated "not supported" is
``pynvml.NVMLError_NotSupported``, a field value comes back in a real
``c_nvmlFieldValue_t``. Only the functions answer from the simulated state. The collector
types what it calls against agent/collectors/nvml_api.py ``NvmlApi``, which this class,
real pynvml and the counting wrapper all satisfy.
"""

from __future__ import annotations

import ctypes
import functools
import signal
import threading
import time
import types
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar, cast

import pynvml

from ..state import counter
from ..state.hardware import REMOTE_GPU, SimFabric, SimGpu, SimNode

T = TypeVar("T")
NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT
# NVLink-C2C per-link fields (scope = C2C link): status, bandwidth, error counters.
_C2C_LINK_FIELDS = frozenset({171, 172, 231, 232, 233, 234})


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


def _device(func: Callable[..., T]) -> Callable[..., T]:
    """A device call: per-GPU behaviour (a lost or hung GPU, one faulty call) applies
    before the GPU answers, as the driver's does; the method is given the GPU, not the
    handle."""
    name = func.__name__

    @functools.wraps(func)
    def method(self: SimNvml, handle: _Handle, *args: Any) -> T:
        self._need_init()
        gpu = handle.gpu
        if gpu.hang:
            threading.Event().wait()
        if gpu.lost is not None:
            _raise(gpu.lost)
        if name in gpu.call_errors:
            _raise(gpu.call_errors[name])
        return func(self, gpu, *args)

    return cast("Callable[..., T]", method)


class SimNvml:
    """pynvml as a simulated node's hardware answers it (agent.collectors.nvml_api.NvmlApi).

    The functions are its methods; pynvml's own constants, structs and NVMLError classes
    are read from pynvml itself, so our error handling runs exactly as on hardware. A
    pynvml function the simulator does not answer is missing, as on an older driver.
    """

    def __init__(self, node: SimNode) -> None:
        self.node = node
        self.initialised = 0  # nvmlInit calls not yet shut down

    def __getattr__(self, name: str) -> Any:
        value = getattr(pynvml, name)
        if callable(value) and not isinstance(value, type):
            raise AttributeError(f"the simulated NVML has no {name}")
        return value

    def nvmlInit(self) -> None:
        if self.node.driver_error is not None:
            _raise(self.node.driver_error)
        if any(g.hang for g in self.node.gpus):
            # A process blocked in the driver does not die on SIGTERM either.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        self.initialised += 1

    def nvmlInitWithFlags(self, flags: int) -> None:
        self.nvmlInit()

    def nvmlShutdown(self) -> None:
        self.initialised = max(0, self.initialised - 1)

    def _need_init(self) -> None:
        if not self.initialised:
            _raise(pynvml.NVML_ERROR_UNINITIALIZED)

    def nvmlSystemGetDriverVersion(self) -> str:
        self._need_init()
        return self.node.driver_version

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._need_init()
        return f"{self.node.cuda_version // 1000}.{self.node.driver_version}"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._need_init()
        return self.node.cuda_version

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self.nvmlSystemGetCudaDriverVersion()

    def nvmlSystemGetNvlinkBwMode(self) -> int:
        """The node's NVLink bandwidth mode; nvml.h: NOT_SUPPORTED where no GPU is Hopper
        or newer."""
        self._need_init()
        if all(gpu.architecture < 9 for gpu in self.node.gpus):
            _raise(NOT_SUPPORTED)
        if self.node.nvlink_bw_mode_error is not None:
            _raise(self.node.nvlink_bw_mode_error)
        return self.node.nvlink_bw_mode

    def nvmlDeviceGetCount(self) -> int:
        self._need_init()
        return len(self.node.nvml_gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._need_init()
        gpus = self.node.nvml_gpus
        if not 0 <= index < len(gpus):
            _raise(INVALID_ARGUMENT)
        gpu = gpus[index]
        if "nvmlDeviceGetHandleByIndex" in gpu.call_errors:
            _raise(gpu.call_errors["nvmlDeviceGetHandleByIndex"])
        return _Handle(gpu)

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str) -> _Handle:
        self._need_init()
        wanted = bus_id.lower()[-12:]
        for gpu in self.node.nvml_gpus:
            if gpu.bdf[-12:] == wanted:
                return _Handle(gpu)
        _raise(pynvml.NVML_ERROR_NOT_FOUND)
        raise AssertionError

    @_device
    def nvmlDeviceGetIndex(self, gpu: SimGpu) -> int:
        return self.node.nvml_gpus.index(gpu)

    @_device
    def nvmlDeviceGetName(self, gpu: SimGpu) -> str:
        return gpu.name

    @_device
    def nvmlDeviceGetUUID(self, gpu: SimGpu) -> str:
        return gpu.uuid

    @_device
    def nvmlDeviceGetSerial(self, gpu: SimGpu) -> str:
        return gpu.serial

    @_device
    def nvmlDeviceGetPciInfo(self, gpu: SimGpu) -> Any:
        return _pci_info(gpu.bdf, self.node.layout.gpu_device_id)

    @_device
    def nvmlDeviceGetBoardPartNumber(self, gpu: SimGpu) -> str:
        return gpu.board_part

    @_device
    def nvmlDeviceGetVbiosVersion(self, gpu: SimGpu) -> str:
        return gpu.vbios

    @_device
    def nvmlDeviceGetInforomImageVersion(self, gpu: SimGpu) -> str:
        return gpu.inforom

    @_device
    def nvmlDeviceValidateInforom(self, gpu: SimGpu) -> None:
        if not gpu.inforom_valid:
            _raise(pynvml.NVML_ERROR_CORRUPTED_INFOROM)

    @_device
    def nvmlDeviceGetArchitecture(self, gpu: SimGpu) -> int:
        return gpu.architecture

    @_device
    def nvmlDeviceGetCudaComputeCapability(self, gpu: SimGpu) -> tuple[int, int]:
        return {7: (8, 0), 9: (9, 0), 10: (10, 0)}.get(gpu.architecture, (0, 0))

    @_device
    def nvmlDeviceGetMemoryInfo(self, gpu: SimGpu) -> Any:
        mem = pynvml.c_nvmlMemory_t()
        mem.total = gpu.memory_bytes
        mem.used = sum(p[1] for p in gpu.processes)
        mem.free = mem.total - mem.used
        return mem

    @_device
    def nvmlDeviceGetMinorNumber(self, gpu: SimGpu) -> int:
        return gpu.index

    @_device
    def nvmlDeviceGetTemperature(self, gpu: SimGpu, sensor: int) -> int:
        return gpu.temperature

    @_device
    def nvmlDeviceGetTemperatureThreshold(self, gpu: SimGpu, kind: int) -> int:
        return {0: gpu.shutdown_temp, 1: gpu.slowdown_temp}.get(kind) or _raise(NOT_SUPPORTED)

    @_device
    def nvmlDeviceGetCurrentClocksEventReasons(self, gpu: SimGpu) -> int:
        return gpu.clock_reasons

    @_device
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, gpu: SimGpu) -> int:
        return gpu.clock_reasons

    @_device
    def nvmlDeviceGetClockInfo(self, gpu: SimGpu, clock: int) -> int:
        return gpu.sm_clock

    @_device
    def nvmlDeviceGetMaxClockInfo(self, gpu: SimGpu, clock: int) -> int:
        return gpu.sm_clock_max

    @_device
    def nvmlDeviceGetApplicationsClock(self, gpu: SimGpu, clock: int) -> int:
        return gpu.app_clock

    @_device
    def nvmlDeviceGetPerformanceState(self, gpu: SimGpu) -> int:
        return gpu.pstate

    @_device
    def nvmlDeviceGetCurrPcieLinkGeneration(self, gpu: SimGpu) -> int:
        return gpu.pcie_gen

    @_device
    def nvmlDeviceGetCurrPcieLinkWidth(self, gpu: SimGpu) -> int:
        return gpu.pcie_width

    @_device
    def nvmlDeviceGetMaxPcieLinkGeneration(self, gpu: SimGpu) -> int:
        return self.node.profile.gpu_pcie_gen or gpu.pcie_gen

    @_device
    def nvmlDeviceGetMaxPcieLinkWidth(self, gpu: SimGpu) -> int:
        return self.node.profile.gpu_pcie_width or 16

    @_device
    def nvmlDeviceGetPcieReplayCounter(self, gpu: SimGpu) -> int:
        return self._field(gpu, 94)

    @_device
    def nvmlDeviceGetPersistenceMode(self, gpu: SimGpu) -> int:
        return gpu.persistence

    @_device
    def nvmlDeviceGetMigMode(self, gpu: SimGpu) -> list[int]:
        if gpu.architecture < 7:
            _raise(NOT_SUPPORTED)
        return list(gpu.mig)

    @_device
    def nvmlDeviceGetComputeRunningProcesses(self, gpu: SimGpu) -> list[Any]:
        procs = []
        for pid, used in gpu.processes:
            proc = pynvml.c_nvmlProcessInfo_v3_t()
            proc.pid, proc.usedGpuMemory = pid, used
            proc.gpuInstanceId = proc.computeInstanceId = 0xFFFFFFFF
            procs.append(pynvml.nvmlStructToFriendlyObject(proc))
        return procs

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        return self.node.proc_names.get(pid) or _raise(pynvml.NVML_ERROR_NOT_FOUND)

    @_device
    def nvmlDeviceGetRowRemapperHistogram(self, gpu: SimGpu) -> Any:
        if gpu.mig[0]:
            _raise(NOT_SUPPORTED)
        hist = pynvml.c_nvmlRowRemapperHistogramValues()
        for key, value in gpu.histogram.items():
            setattr(hist, key, value)
        return hist

    @_device
    def nvmlDeviceGetRemappedRows(self, gpu: SimGpu) -> tuple[int, int, int, int]:
        if gpu.mig[0]:
            _raise(NOT_SUPPORTED)
        return (self._field(gpu, 142), self._field(gpu, 143), self._field(gpu, 144),
                self._field(gpu, 145))

    def _fabric(self, gpu: SimGpu, version: int, refusal: int) -> SimFabric:
        """The GPU's fabric state, once the driver knows ``version``: a driver older than
        it answers ``refusal`` (nvml.h: NVML_ERROR_ARGUMENT_VERSION_MISMATCH for a struct
        version it does not know; pynvml's FUNCTION_NOT_FOUND for a function its library
        lacks)."""
        if version not in self.node.fabric_info_versions:
            _raise(refusal)
        if gpu.fabric is None:
            _raise(NOT_SUPPORTED)
        return gpu.fabric

    @_device
    def nvmlDeviceGetGpuFabricInfo_v4(self, gpu: SimGpu, ref: Any) -> int:
        """Version 4's cliques: one per type the driver reports (structnvmlGpuFabricInfo__v4__t:
        unicast and multicast pointer on Hopper, also unicast and multicast logical
        endpoint on Blackwell and later), the unicast pointer's id the clique id of v3.
        That the other types carry the same id is this simulator's assumption: no
        capture of a v4 answer was found."""
        fab = self._fabric(gpu, 4, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        info = ref._obj
        ctypes.memmove(info.clusterUuid, fab.cluster_uuid, 16)
        info.status, info.state = fab.status, fab.state
        info.healthMask, info.healthSummary = fab.health_mask, fab.health_summary
        types = range(4 if gpu.architecture >= 10 else 2)  # NVML_GPU_FABRIC_CLIQUE_TYPE_*
        for i, kind in enumerate(types):
            info.cliques[i].type, info.cliques[i].id = kind, fab.clique_id
        info.numCliques = len(types)
        return pynvml.NVML_SUCCESS

    @_device
    def nvmlDeviceGetGpuFabricInfoV(self, gpu: SimGpu, ref: Any) -> int:
        info = ref._obj
        fab = self._fabric(gpu, info.version >> 24, pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        ctypes.memmove(info.clusterUuid, fab.cluster_uuid, 16)
        info.status, info.cliqueId, info.state = fab.status, fab.clique_id, fab.state
        info.healthMask = fab.health_mask
        if hasattr(info, "healthSummary"):
            info.healthSummary = fab.health_summary
        return pynvml.NVML_SUCCESS

    @_device
    def nvmlDeviceGetGpuFabricInfo(self, gpu: SimGpu, ref: Any) -> int:
        fab = self._fabric(gpu, 1, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        info = ref._obj
        ctypes.memmove(info.clusterUuid, fab.cluster_uuid, 16)
        info.status, info.cliqueId, info.state = fab.status, fab.clique_id, fab.state
        return pynvml.NVML_SUCCESS

    @_device
    def nvmlDeviceGetSramEccErrorStatus(self, gpu: SimGpu, ref: Any) -> int:
        ref._obj.bThresholdExceeded = gpu.sram_exceeded
        return pynvml.NVML_SUCCESS

    @_device
    def nvmlDeviceGetUnrepairableMemoryFlag_v1(self, gpu: SimGpu) -> int:
        return gpu.unrepairable

    @_device
    def nvmlDeviceGetPlatformInfo(self, gpu: SimGpu, ref: Any) -> int:
        if not self.node.profile.nvl72:
            _raise(NOT_SUPPORTED)
        info = ref._obj
        info.chassisSerialNumber = b"1821225000001"
        raw = (ctypes.c_char * 5).from_buffer(info, type(info).slotNumber.offset)
        tray = int("".join(c for c in self.node.name[-2:] if c.isdigit()) or 0)
        ctypes.memmove(raw, bytes([tray, tray, 0, 0, gpu.index + 1]), 5)
        return pynvml.NVML_SUCCESS

    @_device
    def nvmlDeviceGetPowerUsage(self, gpu: SimGpu) -> int:
        return int(self._field(gpu, 185))

    @_device
    def nvmlDeviceGetEnforcedPowerLimit(self, gpu: SimGpu) -> int:
        return int(self._field(gpu, 190))

    @_device
    def nvmlDeviceGetPowerManagementLimit(self, gpu: SimGpu) -> int:
        return int(self._field(gpu, 190))

    @_device
    def nvmlDeviceGetPowerManagementDefaultLimit(self, gpu: SimGpu) -> int:
        return int(self._field(gpu, 189))

    @_device
    def nvmlDeviceGetEccMode(self, gpu: SimGpu) -> list[int]:
        return [int(self._field(gpu, 1)), int(self._field(gpu, 2))]

    def _field(self, gpu: SimGpu, fid: int, scope: int | None = None) -> Any:
        if scope is not None and fid in _C2C_LINK_FIELDS:
            return self._c2c_field(gpu, fid, scope)
        if scope is not None:
            if gpu.mig[0] or scope >= len(gpu.links):
                _raise(NOT_SUPPORTED if gpu.mig[0] else INVALID_ARGUMENT)
            link = gpu.links[scope]
            per_link: dict[int, Any] = {165: link.state, 166: link.version,
                                        164: link.speed_mbps}
            if fid in per_link:
                return per_link[fid]
            if fid in link.errors:
                return link.errors[fid].value(self.node.epoch)
            if fid in link.nvlink5:
                return link.nvlink5[fid]
            _raise(NOT_SUPPORTED)
        if fid in gpu.counters:
            return gpu.counters[fid].value(self.node.epoch)
        if gpu.mig[0] and fid in (91, 147, 142, 143, 144, 145):
            _raise(NOT_SUPPORTED)
        value = gpu.fields.get(fid)
        if value is None:
            _raise(NOT_SUPPORTED)
        return value

    def _c2c_field(self, gpu: SimGpu, fid: int, scope: int) -> Any:
        if not gpu.c2c_links:
            _raise(NOT_SUPPORTED)
        if not 0 <= scope < len(gpu.c2c_links):
            _raise(INVALID_ARGUMENT)
        link = gpu.c2c_links[scope]
        if fid == 171:
            return link.status
        if fid == 172:
            return link.max_bw_mbps
        if fid in link.errors:
            return link.errors[fid].value(self.node.epoch)
        _raise(NOT_SUPPORTED)

    @_device
    def nvmlDeviceGetC2cModeInfoV(self, gpu: SimGpu) -> Any:
        if gpu.c2c_enabled is None:
            _raise(NOT_SUPPORTED)
        info = pynvml.c_nvmlC2cModeInfo_v1_t()
        info.isC2cEnabled = gpu.c2c_enabled
        return info

    @_device
    def nvmlDeviceGetFieldValues(self, gpu: SimGpu, field_ids: list[Any]) -> Any:
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for i, spec in enumerate(field_ids):
            fid, scope = spec if isinstance(spec, tuple) else (spec, None)
            entry = values[i]
            entry.fieldId, entry.scopeId = fid, scope or 0
            try:
                value = self._field(gpu, fid, scope)
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

    def _link(self, gpu: SimGpu, link: int) -> Any:
        if gpu.mig[0] or not gpu.links:
            _raise(NOT_SUPPORTED)
        if not 0 <= link < len(gpu.links):
            _raise(INVALID_ARGUMENT)
        return gpu.links[link]

    @_device
    def nvmlDeviceGetNvLinkState(self, gpu: SimGpu, link: int) -> int:
        return int(self._link(gpu, link).state)

    @_device
    def nvmlDeviceGetNvLinkVersion(self, gpu: SimGpu, link: int) -> int:
        return int(self._link(gpu, link).version)

    @_device
    def nvmlDeviceGetNvLinkRemoteDeviceType(self, gpu: SimGpu, link: int) -> int:
        return int(self._link(gpu, link).remote_type)

    @_device
    def nvmlDeviceGetNvLinkRemotePciInfo(self, gpu: SimGpu, link: int) -> Any:
        lnk = self._link(gpu, link)
        if not lnk.remote_bdf:
            _raise(NOT_SUPPORTED)
        layout = self.node.layout
        return _pci_info(lnk.remote_bdf, layout.gpu_device_id if lnk.remote_type == REMOTE_GPU
                         else layout.nvswitch_device_id)

    @_device
    def nvmlDeviceGetNvLinkErrorCounter(self, gpu: SimGpu, link: int, counter: int) -> int:
        fid = {0: 161, 1: 162, 2: 163}.get(counter)
        lnk = self._link(gpu, link)
        if fid is None or fid not in lnk.errors:
            _raise(NOT_SUPPORTED)
        return lnk.errors[fid].value(self.node.epoch)

    @_device
    def nvmlDeviceGetP2PStatus(self, gpu: SimGpu, other: _Handle, index: int) -> int:
        if not gpu.links:
            return int(pynvml.NVML_P2P_STATUS_NOT_SUPPORTED)
        a, b = sorted((gpu.index, other.gpu.index))
        return self.node.p2p.get((a, b), int(pynvml.NVML_P2P_STATUS_NOT_SUPPORTED))

    @_device
    def nvmlDeviceGetTopologyCommonAncestor(self, gpu: SimGpu, other: _Handle) -> int:
        same_numa = gpu.numa == other.gpu.numa
        return int(pynvml.NVML_TOPOLOGY_NODE if same_numa else pynvml.NVML_TOPOLOGY_SYSTEM)

    @_device
    def nvmlDeviceGetSupportedEventTypes(self, gpu: SimGpu) -> int:
        return int(pynvml.nvmlEventTypeXidCriticalError)

    # Events: nvmlEventSetWait delivers the node's ``xid_schedule`` as real NVML does, each
    # event once per event set, blocking up to the timeout, NVML_ERROR_TIMEOUT when none
    # is due.

    def nvmlEventSetCreate(self) -> _EventSet:
        self._need_init()
        return _EventSet()

    def nvmlDeviceRegisterEvents(self, handle: _Handle, types_mask: int,
                                 event_set: _EventSet) -> None:
        if handle.gpu.lost is not None:
            _raise(handle.gpu.lost)
        if types_mask & pynvml.nvmlEventTypeXidCriticalError:
            event_set.gpus.add(handle.gpu.index)

    def nvmlEventSetWait_v2(self, event_set: _EventSet, timeout_ms: int) -> Any:
        node = self.node
        limit = counter.now() + timeout_ms / 1000.0
        pending = sorted((node.epoch + at, n) for n, (at, gpu, _) in enumerate(node.xid_schedule)
                         if gpu in event_set.gpus and n not in event_set.delivered)
        if not pending or pending[0][0] > limit:
            time.sleep(max(0.0, limit - counter.now()))
            _raise(pynvml.NVML_ERROR_TIMEOUT)
        due, n = pending[0]
        time.sleep(max(0.0, due - counter.now()))
        event_set.delivered.add(n)
        _, index, code = node.xid_schedule[n]
        gpu = next(g for g in node.gpus if g.index == index)
        return types.SimpleNamespace(device=_Handle(gpu), eventType=int(
            pynvml.nvmlEventTypeXidCriticalError), eventData=code, gpuInstanceId=0xFFFFFFFF,
            computeInstanceId=0xFFFFFFFF)

    nvmlEventSetWait = nvmlEventSetWait_v2

    def nvmlEventSetFree(self, event_set: _EventSet) -> None:
        event_set.gpus.clear()


class _EventSet:
    """Which GPUs registered for XID events, and how many scheduled events it delivered."""

    def __init__(self) -> None:
        self.gpus: set[int] = set()
        self.delivered: set[int] = set()


def build_module(node: SimNode) -> SimNvml:
    """The pynvml stand-in for ``node`` (SourceEnv.nvml answers it)."""
    return SimNvml(node)
