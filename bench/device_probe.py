"""On a machine with a real GPU: ask NVML every call clusterdiag makes, print what each
answered (value, or the NVMLError class), and time a snapshot. Read-only: nothing here
resets, reconfigures or loads a GPU.

    python3 bench/device_probe.py OUTDIR
"""

from __future__ import annotations

import ctypes
import json
import sys
import time
from pathlib import Path

import pynvml


def probe(out: Path) -> None:
    pynvml.nvmlInit()
    answers: dict[str, object] = {}
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def ask(name: str, *args: object) -> None:
        try:
            value = getattr(pynvml, name)(handle, *args)
            answers[f"{name}{list(args) if args else ''}"] = repr(value)[:200]
        except Exception as exc:  # noqa: BLE001 - recording what real NVML says
            answers[f"{name}{list(args) if args else ''}"] = type(exc).__name__

    for name in ("nvmlDeviceGetName", "nvmlDeviceGetArchitecture", "nvmlDeviceGetPersistenceMode",
                 "nvmlDeviceGetMigMode", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetPerformanceState", "nvmlDeviceGetCurrPcieLinkGeneration",
                 "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkGeneration",
                 "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetPcieReplayCounter",
                 "nvmlDeviceGetEccMode", "nvmlDeviceGetRemappedRows",
                 "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetUnrepairableMemoryFlag_v1",
                 "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceValidateInforom",
                 "nvmlDeviceGetInforomImageVersion", "nvmlDeviceGetBoardPartNumber"):
        ask(name)
    for kind in (0, 1, 2, 3):
        ask("nvmlDeviceGetTemperatureThreshold", kind)
    for link in (0, 17, 18):
        ask("nvmlDeviceGetNvLinkState", link)
        ask("nvmlDeviceGetNvLinkRemoteDeviceType", link)
    hist = pynvml.c_nvmlRowRemapperHistogramValues()
    try:
        hist = pynvml.nvmlDeviceGetRowRemapperHistogram(handle)
        answers["histogram"] = {k: getattr(hist, k) for k in ("max", "high", "partial", "low",
                                                             "none")}
    except pynvml.NVMLError as exc:
        answers["histogram"] = type(exc).__name__
    for struct in ("c_nvmlGpuFabricInfo_v3_t", "c_nvmlGpuFabricInfoV_t"):
        info = getattr(pynvml, struct)()
        try:
            pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
            answers[f"fabric {struct}"] = {k: (bytes(getattr(info, k)).hex()
                                               if k == "clusterUuid" else getattr(info, k))
                                           for k, _ in info._fields_}
        except pynvml.NVMLError as exc:
            answers[f"fabric {struct}"] = type(exc).__name__
    fields = [1, 2, 3, 4, 5, 6, 29, 30, 31, 82, 91, 94, 142, 143, 144, 145, 147, 185, 189, 190,
              193, 194, 230, (161, 0), (162, 0), (163, 0), (164, 0), (165, 0), (166, 0),
              (208, 0), (214, 0), (215, 0), (221, 0)]
    values = pynvml.nvmlDeviceGetFieldValues(handle, fields)
    answers["fields"] = {str(fields[i]): (values[i].nvmlReturn, values[i].valueType,
                                          values[i].value.ullVal) for i in range(len(fields))}
    (out / "probe.json").write_text(json.dumps(answers, indent=1, default=str))
    print(json.dumps(answers, indent=1, default=str)[:6000])


if __name__ == "__main__":
    started = time.monotonic()
    probe(Path(sys.argv[1]))
    print(f"probe took {time.monotonic() - started:.3f} s")
