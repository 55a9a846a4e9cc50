"""Reading NVML for one node, in-process: the calls, batched, and what each answer means.

This module only talks to a pynvml-like module object (real pynvml or the simulator)
and returns plain data. It runs inside the isolated worker (nvml.py), where a hung call
can be abandoned; nothing here knows about deadlines.

Call budget (per GPU, H100: these 24 and 3.5 of P2P pairs): handle, PCI info, serial, board
part, VBIOS, InfoROM version and validity, architecture, memory, temperature, slowdown
threshold, clock events, SM clock, its maximum, its application clock, P-state,
persistence, MIG, processes, remapper histogram, fabric info, SRAM status, unrepairable
flag, and ONE field-value batch for every counter, the slowdown times and every per-link
value (_fields). A fabric-info version the driver or binding refuses is asked once per
node, not per GPU (NodeFacts). None of the getters has a field id of the same meaning in
nvml.h (NVML_FI_DEV_TEMPERATURE_*_TLIMIT are margins to the limit, not the threshold in
degrees), so each stays its own call. The name, UUID and minor number come from the
driver's procfs file and the current PCIe gen and width from sysfs, by the BDF the PCI
info gave (gpu_files.py: the same values, five calls fewer; NVML is asked for any the
files do not give); the maximum PCIe gen/width come from sysfs too (the PCI source). A
GPU with NVLink-C2C to a Grace CPU costs two more: its C2C mode and one batch of its C2C
links. The node adds the P2P status of each GPU pair and, where a GPU has NVLink5 links,
the NVLink bandwidth mode the site may have set (one call).
"""

from __future__ import annotations

import itertools
import json
import threading
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..model import nvlink_ber
from ..model.gpu import C2cLink, FabricClique, FabricInfo, Gpu, GpuProcess, NvLink, NvmlInfo
from ..model.pci import pci_address
from ..model.record import MISSING, fields
from ..model.serde import SerdeError, from_jsonable, to_jsonable
from .gpu_files import CurrentLink, DriverIdentity, read_current_link, read_identity
from .nvml_budget import CallClock

if TYPE_CHECKING:
    from .nvml_api import NvmlApi

# Error names that mean "this part or driver does not have it", not "broken".
# Deprecated: drivers from 590 answer it for applications clocks (nvidia-smi -q: "Requested
# functionality has been deprecated").
UNSUPPORTED = frozenset({"NotSupported", "FunctionNotFound", "NoPermission",
                         "ArgumentVersionMismatch", "NVMLLibraryMismatchError", "Deprecated"})
FATAL = frozenset({"GpuIsLost", "ResetRequired"})

ARCH_AMPERE = 7  # NVML_DEVICE_ARCH_* in nvml.h
ARCH_HOPPER = 9
ARCH_BLACKWELL = 10
# NVLinks per GPU by architecture, asked for in the device batch before the GPU's own
# count (field 91) is known: 12 third-generation links on A100 (NVIDIA A100 Tensor Core
# GPU Architecture whitepaper), 18 fourth-generation on H100 (NVIDIA H100 Tensor Core GPU
# Architecture whitepaper) and 18 fifth-generation on Blackwell (NVIDIA Blackwell
# Architecture Technical Brief). Another architecture reads its links in a batch of their
# own, as does a GPU that counts more links than planned here.
LINKS_BY_ARCH = {ARCH_AMPERE: 12, ARCH_HOPPER: 18, ARCH_BLACKWELL: 18}

# Device-scope fields read in the one batch (NVML_FI_DEV_* in nvml.h), keyed by
# the Gpu field each fills: a failed one is reported under that same name.
DEVICE_FIELDS: dict[str, int] = {
    "ecc_enabled": 1, "ecc_pending": 2,
    "ecc_volatile_corrected": 3, "ecc_volatile_uncorrected": 4,
    "ecc_aggregate_corrected": 5, "ecc_aggregate_uncorrected": 6,
    "retired_pages_sbe": 29, "retired_pages_dbe": 30, "retired_pending": 31,
    "remapped_corrected": 142, "remapped_uncorrected": 143, "remap_pending": 144,
    "remap_failure": 145, "memory_temperature_c": 82, "recovery_action": 230,
    "pcie_replay_count": 94, "nvlink_count": 91, "nvswitch_link_count": 147,
    "power_draw_w": 185, "power_limit_w": 190, "power_default_limit_w": 189,
    "c2c_link_count": 170,
}
# Per-link fields (scope = link). Blackwell dropped the DL replay/recovery/CRC counters
# (nvml.h on fields 161-163: "unsupported for Blackwell+"), so each generation asks for its own.
LINK_STATE, LINK_VERSION, LINK_SPEED = 165, 166, 164
LINK_ERRORS_LEGACY = {"replay": 161, "recovery": 162, "crc": 163}
LINK_ERRORS_NVLINK5 = {"recovery_failed": 214, "recovery": 215, "rcv_errors": 208,
                       "local_link_integrity": 211, "symbol_errors": 221}
# NVLink5's other per-link values, in the same batch (nvml.h): the power state
# (NVML_FI_DEV_NVLINK_GET_POWER_STATE), the packed bit error rates
# (NVML_FI_DEV_NVLINK_COUNT_EFFECTIVE_BER, _SYMBOL_BER: model/nvlink_ber.py) and, when
# nvlink.fec_history is planned, the corrected-symbol histogram
# (NVML_FI_DEV_NVLINK_COUNT_FEC_HISTORY_0 to _15).
LINK_POWER_STATE = 167
LINK_BER_NVLINK5 = {"effective_ber": 220, "symbol_ber": 222}
LINK_FEC_HISTORY = tuple(range(235, 251))
REMOTE_TYPES = {0: "gpu", 1: "ibmnpu", 2: "switch", 255: "unknown"}
# NVLink-C2C, per link (scope = link): nvml.h 170-172 "Number of C2C Links present on the
# device", "C2C Link Status 0=INACTIVE 1=ACTIVE", "C2C Link Speed in MBps for active
# links"; the error counters since NVML 575 (nvidia-ml-py 13.615.71 pynvml.py,
# NVML_FI_DEV_C2C_LINK_ERROR_INTR/_REPLAY/_REPLAY_B2B = 231-233; DCGM's dcgm_fields.h
# names them "C2C Link CRC Error Counter", "... Replay Error Counter", "... Back to Back
# Replay Error Counter"). A driver older than a field answers InvalidArgument for it (as
# for the clock-event fields): "not on this driver", never a broken GPU.
C2C_LINK_STATUS, C2C_LINK_MAX_BW = 171, 172
C2C_LINK_ERRORS = {"crc": 231, "replay": 232, "replay_b2b": 233}
NVML_CLOCK_SM = 1
# Accumulated slowdown time per reason (NVML_FI_DEV_CLOCKS_EVENT_REASON_* in nvml.h),
# read in the device batch: a driver older than the fields answers InvalidArgument in their
# entries, which here means "not on this driver", not a broken GPU.
CLOCK_EVENT_TIME_FIELDS = {"sw_thermal": 269, "hw_thermal": 270, "hw_power_brake": 271}

# Fabric-info versions, newest first: (version, function, pynvml struct). Version 4 is its
# own function (nvmlDeviceGetGpuFabricInfo_v4, NVML 615: typed cliques in place of one
# clique id; docs.nvidia.com/deploy/nvml-api/api/structnvmlGpuFabricInfo__v4__t.html);
# nvmlDeviceGetGpuFabricInfoV reads the version the struct carries, v3 (healthSummary,
# structnvmlGpuFabricInfo__v3__t.html) or v2 (healthMask, archive/R550/nvml-api/
# structnvmlGpuFabricInfo__v2__t.html); v1 (nvmlDeviceGetGpuFabricInfo) has neither.
# pynvml 13.615.71 defines all four; an older binding lacks the newer structs.
FABRIC_VERSIONS = ((4, "nvmlDeviceGetGpuFabricInfo_v4", "c_nvmlGpuFabricInfo_v4_t"),
                   (3, "nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v3_t"),
                   (2, "nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v2_t"),
                   (1, "nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"))
# What a driver older than the version answers: NVML_ERROR_ARGUMENT_VERSION_MISMATCH for a
# struct version it does not know, FunctionNotFound (pynvml, when the library lacks the
# symbol) for a function it does not have. Either means: ask the next older version.
FABRIC_OLDER = frozenset({"ArgumentVersionMismatch", "FunctionNotFound"})
CLIQUE_UNICAST_POINTER = 0  # NVML_GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER

# nvmlValueType_t -> union member
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                 6: "usVal"}


def error_name(exc: BaseException) -> str:
    """``NVMLError_GpuIsLost`` -> ``GpuIsLost``; other exceptions keep their class name.
    A code the installed pynvml has no class for comes as a bare ``NVMLError`` with its
    ``value``: named from nvmlReturn_t where we know it."""
    name = type(exc).__name__
    if name == "NVMLError" and isinstance(getattr(exc, "value", None), int):
        return _RETURN_NAMES.get(exc.value, name)  # type: ignore[attr-defined]
    return name.removeprefix("NVMLError_")


def _byref(struct: Any) -> Any:
    """``ctypes.byref``, ctypes imported only here: where NVML answers, pynvml has imported
    it already; where its library is missing, the prolog never pays for it."""
    import ctypes  # ctypes only where NVML answers (pynvml loaded it then)

    return ctypes.byref(struct)


# How long a reader waits for another GPU's answer to a question about the whole node.
# NVML answers such a call in milliseconds; a reader that waited in vain asks itself.
WAIT_S = 0.5


class NodeFacts:
    """Refusals heard from one GPU of a node, kept for its other GPUs, keyed by what was
    asked.

    A refusal that names the driver or the library, not the GPU, is the same answer on
    every GPU: pynvml raises FunctionNotFound when the loaded libnvidia-ml lacks the symbol
    (nvidia-ml-py 13.615.71 pynvml.py:1136, ``_nvmlGetFunctionPointer``), and the driver answers
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH for a struct version it does not know (nvml.h:
    "The provided version is invalid/unsupported"). The first GPU to hear one keeps it
    here and the others are not asked again.

    The GPUs are read in parallel threads. While one reader asks, the others wait for its
    answer, so that exactly one GPU pays for each refusal whatever the threads' order (the
    call count is part of the report). The wait is bounded: a reader hung inside that very
    call holds the other GPUs no longer than ``WAIT_S``; after it they ask for themselves.
    """

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._settled: set[str] = set()
        self.refused: dict[str, BaseException] = {}

    @contextmanager
    def learning(self, topic: str) -> Iterator[None]:
        """Held while one reader asks about ``topic``; a no-op once it is settled."""
        if topic in self._settled:
            yield
            return
        with self._guard:
            lock = self._locks.setdefault(topic, threading.Lock())
        held = lock.acquire(timeout=WAIT_S)
        try:
            yield
        finally:
            if held:
                lock.release()

    def settle(self, topic: str) -> None:
        """Nothing more about ``topic`` is to be learned: its readers stop waiting."""
        self._settled.add(topic)


class CountingNvml:
    """Wraps a pynvml-like module and counts every nvml* call made through it."""

    def __init__(self, module: NvmlApi) -> None:
        self._module = module
        self._counter = itertools.count()
        self.calls = 0
        self.clock = CallClock()  # each thread's call in progress: a hang, or our deadline

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if name.startswith("nvml") and callable(value):
            def counted(*args: Any) -> Any:
                self.calls = next(self._counter) + 1
                self.clock.begin()
                try:
                    return value(*args)
                finally:
                    self.clock.end()
            return counted
        return value


class GpuReader:
    """Reads one GPU; each failed value lands in ``unsupported`` or ``errors``."""

    def __init__(self, nv: NvmlApi, index: int, fec_history: bool = False,
                 facts: NodeFacts | None = None, root: Path | None = None) -> None:
        self.nv = nv
        self.root = root  # the files under it spare NVML calls (gpu_files.py); None: ask all
        self.gpu = Gpu(index=index)
        self.handle: Any = None
        self.fec_history = fec_history  # read the FEC bins too (level full)
        self.facts = facts if facts is not None else NodeFacts()  # shared by a node's GPUs

    def call(self, key: str, func: str, *args: Any) -> Any:
        try:
            return getattr(self.nv, func)(*args)
        except Exception as exc:  # noqa: BLE001 - every NVML error becomes data
            self._file(key, func, exc)
            return None

    def _file(self, key: str, func: str, exc: BaseException) -> None:
        """Files the error ``func`` raised for ``key``: lost, unsupported or an error."""
        name = error_name(exc)
        if name in FATAL:
            self.gpu.lost = self.gpu.lost or name
            self.gpu.errors[key] = name
        elif name in UNSUPPORTED:
            self.gpu.unsupported[key] = name
        else:  # the name first (the checks judge it), then the call that returned it
            self.gpu.errors[key] = f"{name}: {func}: {exc}"[:200]

    def read(self) -> Gpu:
        g = self.gpu
        self.handle = self.call("handle", "nvmlDeviceGetHandleByIndex", g.index)
        if self.handle is None:
            g.responsive = g.lost is None
            return g
        h = self.handle
        pci = self.call("pci_bdf", "nvmlDeviceGetPciInfo", h)
        if pci is not None:
            g.pci_bdf = pci_address(pci.domain, pci.bus, pci.device)
        known = (read_identity(self.root, g.pci_bdf) if self.root and g.pci_bdf
                 else DriverIdentity())
        g.name = self._unless_known(known.name, "name", "nvmlDeviceGetName")
        g.uuid = self._unless_known(known.uuid, "uuid", "nvmlDeviceGetUUID")
        g.minor_number = self._unless_known(known.minor_number, "minor_number",
                                            "nvmlDeviceGetMinorNumber")
        g.serial = self.call("serial", "nvmlDeviceGetSerial", h)
        g.board_part_number = self.call("board_part_number", "nvmlDeviceGetBoardPartNumber", h)
        g.vbios = self.call("vbios", "nvmlDeviceGetVbiosVersion", h)
        g.inforom_image = self.call("inforom_image", "nvmlDeviceGetInforomImageVersion", h)
        self._inforom_validity()
        g.architecture = self.call("architecture", "nvmlDeviceGetArchitecture", h)
        mem = self.call("memory_total_bytes", "nvmlDeviceGetMemoryInfo", h)
        g.memory_total_bytes = int(mem.total) if mem is not None else None
        g.temperature_c = self.call("temperature_c", "nvmlDeviceGetTemperature", h,
                                  0)
        g.slowdown_temperature_c = self.call(
            "slowdown_temperature_c", "nvmlDeviceGetTemperatureThreshold", h, 1)
        g.clock_event_reasons = self.call(
            "clock_event_reasons", "nvmlDeviceGetCurrentClocksEventReasons", h)
        g.sm_clock_mhz = self.call("sm_clock_mhz", "nvmlDeviceGetClockInfo", h,
                                   NVML_CLOCK_SM)
        g.sm_clock_max_mhz = self.call("sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo",
                                       h, NVML_CLOCK_SM)
        g.sm_app_clock_mhz = self.call("sm_app_clock_mhz", "nvmlDeviceGetApplicationsClock",
                                       h, NVML_CLOCK_SM)
        g.performance_state = self.call("performance_state", "nvmlDeviceGetPerformanceState", h)
        link = (read_current_link(self.root, g.pci_bdf) if self.root and g.pci_bdf
                else CurrentLink())
        g.pcie_gen_current = self._unless_known(link.gen, "pcie_gen_current",
                                                "nvmlDeviceGetCurrPcieLinkGeneration")
        g.pcie_width_current = self._unless_known(link.width, "pcie_width_current",
                                                  "nvmlDeviceGetCurrPcieLinkWidth")
        persistence = self.call("persistence_mode", "nvmlDeviceGetPersistenceMode", h)
        g.persistence_mode = None if persistence is None else bool(persistence)
        mig = self.call("mig_enabled", "nvmlDeviceGetMigMode", h)  # and mig_pending
        if mig is not None:
            g.mig_enabled, g.mig_pending = bool(mig[0]), bool(mig[1])
        self._processes()
        self._histogram()
        self._fabric()
        if g.architecture is not None and g.architecture >= ARCH_HOPPER:
            self._sram()
            flag = self.call("unrepairable_memory", "nvmlDeviceGetUnrepairableMemoryFlag_v1", h)
            g.unrepairable_memory = None if flag is None else bool(flag)
        if g.architecture is not None and g.architecture >= ARCH_BLACKWELL:
            self._platform()
        self._fields()
        g.responsive = g.lost is None
        return g

    def _unless_known(self, known: Any, key: str, func: str) -> Any:
        """``known`` (what a file said, gpu_files.py), or NVML's answer where it said none."""
        return known if known is not None else self.call(key, func, self.handle)

    def _inforom_validity(self) -> None:
        try:
            self.nv.nvmlDeviceValidateInforom(self.handle)
            self.gpu.inforom_valid = True
        except Exception as exc:  # noqa: BLE001
            name = error_name(exc)
            if name == "CorruptedInforom":
                self.gpu.inforom_valid = False
            elif name in UNSUPPORTED:
                self.gpu.unsupported["inforom_valid"] = name
            else:
                self.gpu.errors["inforom_valid"] = name

    def _processes(self) -> None:
        procs = self.call("processes", "nvmlDeviceGetComputeRunningProcesses", self.handle)
        if procs is not None:
            self.gpu.processes = [
                GpuProcess(pid=int(p.pid), used_memory_bytes=p.usedGpuMemory) for p in procs]

    def _histogram(self) -> None:
        hist = self.call("remap_histogram", "nvmlDeviceGetRowRemapperHistogram", self.handle)
        if hist is not None:
            self.gpu.remap_histogram = {k: int(getattr(hist, k))
                                        for k in ("max", "high", "partial", "low", "none")}

    def _fabric(self) -> None:
        """Fabric info in the newest version both the binding and the driver know.

        A driver before 580 answers a v3 struct with a version mismatch, one before 615
        has no v4 function: each is asked the next older version, so a tray on such a
        driver is still judged. Only where every version the binding knows was refused
        is that kept: a mismatch as an error (the driver has fabric info we could not
        ask for), a missing function as unsupported. A refusal is the driver's or the
        library's, the same on every GPU (NodeFacts): the first GPU that hears it
        keeps it for the others, which ask the answering version only."""
        with self.facts.learning("fabric"):
            self._fabric_versions()

    def _fabric_versions(self) -> None:
        refused: tuple[str, BaseException] | None = None
        for version, func, struct_name in FABRIC_VERSIONS:
            struct_type = getattr(self.nv, struct_name, None)
            if struct_type is None or not hasattr(self.nv, func):
                continue
            key = f"fabric.v{version}"
            exc = self.facts.refused.get(key)
            if exc is None:
                info = struct_type()
                try:
                    getattr(self.nv, func)(self.handle, _byref(info))
                except Exception as raised:  # noqa: BLE001 - every NVML error becomes data
                    exc = raised
                    if error_name(exc) in FABRIC_OLDER:
                        self.facts.refused[key] = exc
            if exc is not None and error_name(exc) in FABRIC_OLDER:
                if refused is None or error_name(exc) == "ArgumentVersionMismatch":
                    refused = (func, exc)
                continue
            if exc is not None:  # this GPU's answer: the next reader still asks
                self._file("fabric", func, exc)
                return
            self.facts.settle("fabric")
            self.gpu.fabric = _fabric_info(version, info)
            return
        self.facts.settle("fabric")
        if refused is None:
            self.gpu.unsupported["fabric"] = "FunctionNotFound"  # a binding without any
        elif error_name(refused[1]) == "ArgumentVersionMismatch":
            self.gpu.errors["fabric"] = (f"ArgumentVersionMismatch: {refused[0]}: no "
                                         f"fabric-info version this binding knows")
        else:
            self._file("fabric", *refused)

    def _sram(self) -> None:
        status = self.nv.c_nvmlEccSramErrorStatus_v1_t()
        status.version = getattr(self.nv, "nvmlEccSramErrorStatus_v1", 0x1000068)
        if self.call("sram_threshold_exceeded", "nvmlDeviceGetSramEccErrorStatus", self.handle,
                     _byref(status)) is not None:
            self.gpu.sram_threshold_exceeded = bool(status.bThresholdExceeded)

    def _platform(self) -> None:
        info = self.nv.c_nvmlPlatformInfo_v2_t()
        if self.call("platform", "nvmlDeviceGetPlatformInfo", self.handle,
                     _byref(info)) is None:
            return
        # pynvml declares the byte fields as c_char (decoded to str, cut at the first NUL):
        # read them from the raw struct instead.
        raw = bytes(memoryview(info))
        start = type(info).chassisSerialNumber.offset
        chassis = raw[start:start + 16].split(b"\0")[0]
        base = type(info).slotNumber.offset
        self.gpu.platform = {
            "chassis_serial": chassis.decode("ascii", errors="replace"),
            "slot": raw[base], "tray_index": raw[base + 1], "host_id": raw[base + 2],
            "module_id": raw[base + 4],
        }

    def _fields(self) -> None:
        """One batch: every device counter, the slowdown times and, for as many links as
        the architecture has (LINKS_BY_ARCH), every per-link value. Each value carries its
        own return code (nvmlDeviceGetFieldValues: "you must check the nvmlReturn field of
        each value for each individual status"; the call fails as a whole only for an
        invalid device or no array), so a link the GPU lacks costs an entry, never the
        batch; entries past the GPU's own link count (field 91) are not read."""
        g = self.gpu
        per_link = self._link_fields()
        planned = LINKS_BY_ARCH.get(g.architecture or 0, 0)
        request: list[Any] = [*DEVICE_FIELDS.values(), *CLOCK_EVENT_TIME_FIELDS.values(),
                              *((fid, link) for link in range(planned) for _, fid in per_link)]
        values = self.call("fields", "nvmlDeviceGetFieldValues", self.handle, request)
        if values is None:
            return
        got = {name: _field_value(values[i]) for i, name in enumerate(DEVICE_FIELDS)}
        for name, (_value, err) in got.items():
            if err is not None:
                (g.unsupported if _unsupported(name, err) else g.errors)[name] = err
        for name, (value, _err) in got.items():
            setattr(g, name, _convert(name, value))
        start = len(DEVICE_FIELDS) + len(CLOCK_EVENT_TIME_FIELDS)
        if g.nvlink_count:
            self._links(g.nvlink_count, per_link, values[start:], planned)
        elif g.nvlink_count == 0 or "nvlink_count" in g.unsupported:
            g.unsupported.setdefault("nvlinks", "NotSupported")
        if g.c2c_link_count is not None:
            self._c2c(g.c2c_link_count)
        self._clock_event_time(values[len(DEVICE_FIELDS):start])

    def _clock_event_time(self, values: Any) -> None:
        for i, name in enumerate(CLOCK_EVENT_TIME_FIELDS):
            value, err = _field_value(values[i])
            if err is None:
                self.gpu.clock_event_time_ns[name] = int(value)
            elif err in UNSUPPORTED or err == "InvalidArgument":
                self.gpu.unsupported[f"clock_event_time_ns.{name}"] = err
            else:
                self.gpu.errors[f"clock_event_time_ns.{name}"] = err

    def _c2c(self, count: int) -> None:
        """The C2C mode and, where the GPU has C2C links, each link's status, bandwidth and
        error counters in one batch. Asked only where field 170 answered, so an x86 host
        (NotSupported there) pays no call."""
        g = self.gpu
        mode = self.call("c2c_enabled", "nvmlDeviceGetC2cModeInfoV", self.handle)
        if mode is not None:
            g.c2c_enabled = bool(mode.isC2cEnabled)
        if count <= 0:
            return
        per_link = [("active", C2C_LINK_STATUS), ("max_bw_mbps", C2C_LINK_MAX_BW),
                    *((f"errors.{name}", fid) for name, fid in C2C_LINK_ERRORS.items())]
        request = [(fid, link) for link in range(count) for _, fid in per_link]
        values = self.call("c2c_fields", "nvmlDeviceGetFieldValues", self.handle, request)
        if values is None:
            return
        width = len(per_link)
        for link in range(count):
            entry = C2cLink(link=link)
            for j, (name, _) in enumerate(per_link):
                value, err = _field_value(values[link * width + j])
                key = f"c2c_links.{link}.{name}"
                if err is not None:
                    (g.unsupported if _unsupported(key, err) else g.errors)[key] = err
                elif name == "active":
                    entry.active = int(value) == 1
                elif name == "max_bw_mbps":
                    entry.max_bw_mbps = int(value)
                else:
                    entry.errors[name.removeprefix("errors.")] = int(value)
            g.c2c_links.append(entry)

    def _link_fields(self) -> list[tuple[str, int]]:
        """The per-link request, keyed by the NvLink field each fills (a counter by its
        place in ``errors``, a FEC bin by its number), so that a failed one is reported as
        ``nvlinks.<link>.<that name>``. Blackwell's NVLink5 has its own counters."""
        nvlink5 = (self.gpu.architecture or 0) >= ARCH_BLACKWELL
        errors = LINK_ERRORS_NVLINK5 if nvlink5 else LINK_ERRORS_LEGACY
        per_link = [("active", LINK_STATE), ("version", LINK_VERSION),
                    ("speed_mbps", LINK_SPEED),
                    *((f"errors.{name}", fid) for name, fid in errors.items())]
        if nvlink5:
            per_link += [("low_power", LINK_POWER_STATE), *LINK_BER_NVLINK5.items()]
            if self.fec_history:
                per_link += [(f"fec_history.{i}", fid) for i, fid in enumerate(LINK_FEC_HISTORY)]
        return per_link

    def _links(self, count: int, per_link: list[tuple[str, int]], values: Any,
               planned: int) -> None:
        """``count`` links from the first ``planned`` links' answers in ``values``; a GPU
        with more links than its architecture plans for is asked for the rest apart."""
        if count > planned:
            rest = [(fid, link) for link in range(planned, count) for _, fid in per_link]
            more = self.call("nvlink_fields", "nvmlDeviceGetFieldValues", self.handle, rest)
            if more is None:
                count = planned
            else:
                values = [*values[:planned * len(per_link)], *more]
        nvlink5 = (self.gpu.architecture or 0) >= ARCH_BLACKWELL
        width = len(per_link)
        for link in range(count):
            entry = NvLink(link=link)
            for j, (name, _) in enumerate(per_link):
                value, err = _field_value(values[link * width + j])
                if err is not None:
                    if err not in UNSUPPORTED:
                        self.gpu.errors[f"nvlinks.{link}.{name}"] = err
                    continue
                _fill(entry, name, int(value), nvlink5)
            self.gpu.nvlinks.append(entry)

    def remote(self, link: NvLink) -> None:
        """Per-link peer details: asked only when the fast path (field 147) disagrees."""
        kind = self.call(f"nvlinks.{link.link}.remote_type",
                         "nvmlDeviceGetNvLinkRemoteDeviceType", self.handle, link.link)
        if kind is not None:
            link.remote_type = REMOTE_TYPES.get(int(kind), "unknown")
        pci = self.call(f"nvlinks.{link.link}.remote_bdf",
                        "nvmlDeviceGetNvLinkRemotePciInfo", self.handle, link.link)
        if pci is not None:
            link.remote_bdf = pci_address(pci.domain, pci.bus, pci.device)


def _fill(entry: NvLink, name: str, value: int, nvlink5: bool) -> None:
    """Set the NvLink field ``name`` (a per-link batch key) from its raw field value."""
    if name == "active":
        entry.active = value == 1
        if nvlink5:
            entry.state = value
    elif name == "version":
        entry.version = value
    elif name == "speed_mbps":
        entry.speed_mbps = value
    elif name == "low_power":
        entry.low_power = value == 1
    elif name in LINK_BER_NVLINK5:
        setattr(entry, name, nvlink_ber.decode(value))
    elif name.startswith("fec_history."):
        if entry.fec_history is None:
            entry.fec_history = [None] * len(LINK_FEC_HISTORY)
        entry.fec_history[int(name.removeprefix("fec_history."))] = value
    else:
        entry.errors[name.removeprefix("errors.")] = value


def checked(gpu: Gpu) -> Gpu:
    """Each value as the model types it, else its default with the reason in ``errors``.

    A binding that answers in another type (bytes for a name, as old pynvml did, or a
    number where a struct belongs) must cost that value: left in, it would fail to encode
    in the worker or to decode in the parent, and the whole GPU would read as hung.
    """
    hints = typing.get_type_hints(Gpu)
    for item in fields(Gpu):
        if item.default is MISSING and item.default_factory is MISSING:
            continue  # the index, which is ours
        value = to_jsonable(getattr(gpu, item.name))
        try:
            json.dumps(value)
            from_jsonable(hints[item.name], value, f"$.{item.name}")
        except (SerdeError, TypeError, ValueError) as exc:
            default = (item.default_factory() if item.default_factory is not MISSING
                       else item.default)
            setattr(gpu, item.name, default)
            gpu.errors[item.name] = f"unexpected answer: {exc}"[:200]
    return gpu


def _unsupported(key: str, err: str) -> bool:
    """Whether a field's error means "not on this part or driver": the C2C fields are
    newer than many drivers, which answer InvalidArgument for a field they do not know."""
    return err in UNSUPPORTED or (key.startswith("c2c") and err == "InvalidArgument")


def _field_value(entry: Any) -> tuple[Any, str | None]:
    ret = int(entry.nvmlReturn)
    if ret != 0:
        return None, _RETURN_NAMES.get(ret, f"NVML error {ret}")
    member = _VALUE_MEMBER.get(int(entry.valueType), "ullVal")
    return getattr(entry.value, member), None


# nvmlReturn_t codes a field value can carry, by pynvml's NVMLError_* names (NVIDIA's
# reference: docs.nvidia.com/deploy/nvml-api/group__nvmlDeviceEnumvs.html); gpu.responsive
# judges each name by what it blames.
_RETURN_NAMES = {1: "Uninitialized", 2: "InvalidArgument", 3: "NotSupported",
                 4: "NoPermission", 6: "NotFound", 7: "InsufficientSize",
                 8: "InsufficientPower", 10: "Timeout", 11: "IrqIssue", 13: "FunctionNotFound",
                 14: "CorruptedInforom", 15: "GpuIsLost", 16: "ResetRequired",
                 17: "OperatingSystem", 19: "InUse", 20: "Memory", 21: "NoData",
                 23: "InsufficientResources", 25: "ArgumentVersionMismatch", 26: "Deprecated",
                 27: "NotReady", 28: "GpuNotFound", 29: "InvalidState", 999: "Unknown"}


def _convert(name: str, value: Any) -> bool | int | float | None:
    """A device field's raw value as the Gpu field ``name`` types it."""
    if value is None:
        return None
    if name in _FLAG_FIELDS:
        return bool(value)
    if name in _WATT_FIELDS:
        return round(float(value) / 1000.0, 3)  # NVML answers milliwatts
    return int(value)


_FLAG_FIELDS = frozenset({"ecc_enabled", "ecc_pending", "retired_pending", "remap_pending",
                          "remap_failure"})
_WATT_FIELDS = frozenset({"power_draw_w", "power_limit_w", "power_default_limit_w"})


def read_system(nv: NvmlApi, info: NvmlInfo) -> bool:
    """Initialise NVML and read the driver-wide values; False when NVML is unusable."""
    try:
        nv.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        info.library_error = error_name(exc)
        info.library_message = str(exc)
        return False
    for key, func, attr in (("driver_version", "nvmlSystemGetDriverVersion", "driver_version"),
                            ("cuda_driver_version", "nvmlSystemGetCudaDriverVersion_v2",
                             "cuda_driver_version"),
                            ("device_count", "nvmlDeviceGetCount", "device_count")):
        try:
            setattr(info, attr, getattr(nv, func)())
        except Exception as exc:  # noqa: BLE001
            info.errors[key] = error_name(exc)
    return True


def read_p2p(nv: NvmlApi, readers: list[GpuReader]) -> dict[str, str]:
    """NVLink P2P status of every GPU pair (the matrix is symmetric: i < j only)."""
    status_names = {0: "ok", 1: "chipset_not_supported", 2: "gpu_not_supported",
                    3: "topology_not_supported", 4: "disabled_by_regkey", 5: "not_supported",
                    6: "unknown"}
    index = int(getattr(nv, "NVML_P2P_CAPS_INDEX_NVLINK", 2))
    result: dict[str, str] = {}
    usable = [r for r in readers if r.handle is not None and r.gpu.lost is None]
    for a, b in itertools.combinations(usable, 2):
        key = f"{a.gpu.index}-{b.gpu.index}"
        try:
            result[key] = status_names.get(int(nv.nvmlDeviceGetP2PStatus(
                a.handle, b.handle, index)), "unknown")
        except Exception as exc:  # noqa: BLE001
            result[key] = f"error:{error_name(exc)}"
    return result


def read_bw_mode(nv: NvmlApi, readers: list[GpuReader]) -> dict[str, Any] | None:
    """The node's NVLink bandwidth mode as ``{"mode", "error"}``, or None where not asked.

    The mode a site may set for the whole node with nvmlSystemSetNvlinkBwMode, NVIDIA's
    "NvLink bandwidth mode" (docs.nvidia.com/deploy/nvml-api/group__NvLink.html; the
    per-device setter's struct calls it "Nvlink Reduced Bandwidth Mode",
    structnvmlNvlinkSetBwModeAsync__v1__t.html), answered as NVML_GPU_NVLINK_BW_MODE_*
    (pynvml 13.615.71: 0 FULL, 1 OFF, 2 MIN, 3 HALF, 4 3QUARTER).
    One system-wide call (nvmlSystemGetNvlinkBwMode), not one per GPU, and only where a GPU
    that answered has NVLink5 links: the generation whose per-link speed is judged, and
    the profile is not known before the snapshot is. nvml.h says the call answers
    NOT_SUPPORTED before Hopper and NO_PERMISSION to a user other than root; either
    leaves the mode unknown (None, no error), as does a binding without the function."""
    if not any(r.gpu.nvlinks and (r.gpu.architecture or 0) >= ARCH_BLACKWELL
               for r in readers):
        return None
    func = getattr(nv, "nvmlSystemGetNvlinkBwMode", None)
    if func is None:
        return None
    try:
        return {"mode": int(func()), "error": None}
    except Exception as exc:  # noqa: BLE001 - every NVML error becomes data
        name = error_name(exc)
        return {"mode": None, "error": None if name in UNSUPPORTED else name}


def resolve_remotes(reader: GpuReader) -> None:
    """Field 147 counts the links that end on an NVSwitch. When it equals the active links,
    every peer is a switch and no per-link call is needed; otherwise (direct GPU links,
    a miscabled link, no field 147) ask each active link for its peer."""
    gpu = reader.gpu
    active = [link for link in gpu.nvlinks if link.active]
    if active and gpu.nvswitch_link_count == len(active):
        for link in active:
            link.remote_type = "switch"
        return
    for link in active:
        reader.remote(link)


def _fabric_info(version: int, info: Any) -> FabricInfo:
    """The fabric info struct of ``version`` as the model keeps it. ``state`` is an
    unsigned char in nvml.h but a c_uint in pynvml's v1-v3 structs: its padding is masked
    off. v4's clique id is its first unicast-pointer clique's, as v3's was
    (structnvmlGpuFabricInfo__v4__t.html: "The legacy v3 cliqueId maps to the id of the
    first NVML_GPU_FABRIC_CLIQUE_TYPE_UNICAST_POINTER entry"); no more cliques are kept
    than the array holds, whatever numCliques says."""
    cliques: list[FabricClique] = []
    if version >= 4:
        count = max(0, min(int(info.numCliques), len(info.cliques)))
        cliques = [FabricClique(type=int(c.type), id=int(c.id)) for c in info.cliques[:count]]
        clique_id = next((c.id for c in cliques if c.type == CLIQUE_UNICAST_POINTER), 0)
    else:
        clique_id = int(info.cliqueId)
    return FabricInfo(
        state=int(info.state) & 0xFF,
        status=int(info.status),
        cluster_uuid=_uuid_text(bytes(info.clusterUuid)),
        clique_id=clique_id,
        health_mask=int(info.healthMask) if version >= 2 else None,
        health_summary=int(getattr(info, "healthSummary", 0)) or None,
        version=version,
        cliques=cliques,
    )


def _uuid_text(raw: bytes) -> str:
    """The canonical 8-4-4-4-12 form; uuid is imported here, not on every start (it pulls
    in platform, a cost the prolog pays on every node for a fabric-attached GPU only)."""
    import uuid  # uuid (and platform) only for a fabric-attached GPU

    return str(uuid.UUID(bytes=raw))
