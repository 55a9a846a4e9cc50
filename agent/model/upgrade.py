"""A snapshot saved under an earlier schema, brought to the current one as it is read.

Schema v1 keyed a GPU's ``unsupported`` and ``errors`` reasons by the collector's call
names (``temperature`` for ``temperature_c``, ``nvlink3.crc`` for a link counter); v2 keys
them by the model's field names (``temperature_c``, ``nvlinks.3.errors.crc``: a value inside
a list or dict is its path), so a check looks a reason up by the name of the value it judges.
A v1 snapshot (``run --from-snapshot``, the daemon's state dir after an upgrade) is judged
as it was: its old keys are renamed here, before the dataclasses are built.

The data is hostile (a file shipped from a broken node): nothing here assumes a shape.
What is not the shape v1 wrote is passed on untouched, for the dataclass reader to refuse
with the path it fails at; the input is never modified.
"""

from __future__ import annotations

import re
from typing import Any

SNAPSHOT_SCHEMA_V1 = "clusterdiag/snapshot/v1"
SNAPSHOT_SCHEMA_V2 = "clusterdiag/snapshot/v2"

# v1 reason key -> the Gpu field it stood for (keys already field names are not listed).
V1_GPU_KEYS: dict[str, str] = {
    "pci": "pci_bdf", "memory": "memory_total_bytes", "temperature": "temperature_c",
    "slowdown_temperature": "slowdown_temperature_c", "sm_clock": "sm_clock_mhz",
    "sm_clock_max": "sm_clock_max_mhz", "pcie_gen": "pcie_gen_current",
    "pcie_width": "pcie_width_current", "mig_mode": "mig_enabled",
    "sram": "sram_threshold_exceeded", "nvlink": "nvlinks",
    "clock_event_time": "clock_event_time_ns",
    # the device field-value batch (NVML_FI_DEV_*)
    "ecc_current": "ecc_enabled", "ecc_sbe_volatile": "ecc_volatile_corrected",
    "ecc_dbe_volatile": "ecc_volatile_uncorrected",
    "ecc_sbe_aggregate": "ecc_aggregate_corrected",
    "ecc_dbe_aggregate": "ecc_aggregate_uncorrected", "retired_sbe": "retired_pages_sbe",
    "retired_dbe": "retired_pages_dbe", "remapped_cor": "remapped_corrected",
    "remapped_unc": "remapped_uncorrected", "memory_temp": "memory_temperature_c",
    "pcie_replay": "pcie_replay_count", "nvswitch_links": "nvswitch_link_count",
    "power_average": "power_draw_w", "power_current_limit": "power_limit_w",
    "power_default_limit": "power_default_limit_w",
}
# v1 per-link value name -> its NvLink field; any other name was a counter in ``errors``.
V1_LINK_KEYS: dict[str, str] = {"state": "active", "version": "version",
                                "speed": "speed_mbps", "remote_type": "remote_type",
                                "remote_pci": "remote_bdf"}
_V1_LINK = r"nvlink([0-9]{1,4})\.([a-z0-9_]{1,64})"
_V1_CLOCK_EVENT = r"clock_event_time\.([a-z0-9_]{1,64})"


def v1_key(key: str) -> str:
    """The v2 name of the v1 reason key ``key`` (itself when it was already a field name)."""
    if key in V1_GPU_KEYS:
        return V1_GPU_KEYS[key]
    if link := re.fullmatch(_V1_LINK, key):
        number, name = link.groups()
        return f"nvlinks.{number}.{V1_LINK_KEYS.get(name, f'errors.{name}')}"
    if clock := re.fullmatch(_V1_CLOCK_EVENT, key):
        return f"clock_event_time_ns.{clock.group(1)}"
    return key


def _reasons(reasons: dict[Any, Any]) -> dict[Any, Any]:
    """Renamed keys; where a hostile file holds both spellings the v2 one wins."""
    renamed: dict[Any, Any] = {}
    for key, reason in reasons.items():
        new = v1_key(key) if isinstance(key, str) else key
        if new == key or new not in renamed:
            renamed[new] = reason
    return renamed


def _gpu(gpu: Any) -> Any:
    if not isinstance(gpu, dict):
        return gpu
    result = dict(gpu)
    for name in ("unsupported", "errors"):
        if isinstance(gpu.get(name), dict):
            result[name] = _reasons(gpu[name])
    return result


def upgrade(data: Any) -> Any:
    """``data`` (a snapshot as JSON values) in the current schema's form.

    Only a v1 object is rewritten, into a new object tagged v2; anything else is returned
    as it came.
    """
    if not isinstance(data, dict) or data.get("schema") != SNAPSHOT_SCHEMA_V1:
        return data
    result = dict(data, schema=SNAPSHOT_SCHEMA_V2)
    nvml = data.get("nvml")
    if isinstance(nvml, dict) and isinstance(nvml.get("gpus"), list):
        result["nvml"] = dict(nvml, gpus=[_gpu(gpu) for gpu in nvml["gpus"]])
    return result
