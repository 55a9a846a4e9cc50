"""NVML reasons keyed by the model's field names (snapshot schema v2), and v1 files still read.

The reader's keys are checked against the model itself (every key a Gpu field, or a path
into one), on a simulated GPU whose every call fails; a v1 snapshot, as the v1 reader wrote
it, loads with its keys renamed and is judged exactly as its v2 twin is.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pynvml
import pytest

from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.collectors.nvml_read import GpuReader
from clusterdiag.agent.model import SNAPSHOT_SCHEMA, Snapshot
from clusterdiag.agent.model.gpu import Gpu, NvLink
from clusterdiag.agent.run.collect import collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.run.snapshot_file import load_snapshot
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import build, env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.writers.nvml import build_module
from clusterdiag.checks.core.finding import Status
from tests.conftest import REPO

REAL_V1 = REPO / "tests/fixtures/real/h200-vm-580.159.04.snapshot.json"
# Calls that fill no one field keep the call's name (agent/model/gpu.py).
NOT_FIELDS = {"handle", "fields", "nvlink_fields"}
GPU_FIELDS = {f.name for f in dataclasses.fields(Gpu)}
LINK_FIELDS = {f.name for f in dataclasses.fields(NvLink)}
KEEP = {"nvmlInit", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex"}


def names_a_field(key: str) -> bool:
    """``key`` is a Gpu field, or a path into one (``nvlinks.3.errors.crc``)."""
    head, *rest = key.split(".")
    if head in NOT_FIELDS:
        return not rest
    if head == "nvlinks" and rest:
        number, name, *counter = rest
        return number.isdigit() and name in LINK_FIELDS and \
            len(counter) == (name == "errors")
    if head == "clock_event_time_ns" and rest:
        return len(rest) == 1
    return head in GPU_FIELDS and not rest


class FailingNvml:
    """The simulated pynvml, each call failing with Unknown but those in ``answer``; the
    field-value batches answer with every entry failing, when ``entries_fail``."""

    def __init__(self, module: Any, answer: set[str], entries_fail: bool) -> None:
        self._module, self._answer, self._entries_fail = module, answer, entries_fail

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if not name.startswith("nvml") or not callable(value) or name in self._answer:
            return value
        if name == "nvmlDeviceGetFieldValues" and self._entries_fail:
            def failing_entries(handle: Any, ids: list[Any]) -> Any:
                values = value(handle, ids)
                for entry in values:
                    if entry.fieldId != 91:  # the link count, so that every link is asked
                        entry.nvmlReturn = pynvml.NVML_ERROR_UNKNOWN
                return values
            return failing_entries

        def failing(*args: Any) -> Any:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        return failing


def read_failing(profile: str, answer: set[str], entries_fail: bool) -> Gpu:
    module = build_module(build(NodeSpec("n1", profile)))
    module.nvmlInit()
    reader = GpuReader(FailingNvml(module, answer, entries_fail), 0)
    gpu = reader.read()
    reader.remote(NvLink(link=0))
    return gpu


@pytest.mark.parametrize("profile", ["dgx-h100", "gb200-nvl72"])
def test_every_reason_the_reader_gives_is_keyed_by_a_model_field(profile: str) -> None:
    every_call_fails = read_failing(profile, KEEP | {"nvmlDeviceGetFieldValues"}, False)
    every_field_fails = read_failing(profile, KEEP, True)
    keys = {*every_call_fails.errors, *every_field_fails.errors}
    assert {"temperature_c", "mig_enabled", "pci_bdf", "sm_clock_mhz", "memory_total_bytes",
            "ecc_enabled", "power_limit_w", "nvlinks.0.remote_type", "nvlinks.0.remote_bdf",
            "nvlinks.1.active", "clock_event_time_ns.sw_thermal"} <= keys
    assert any(k.startswith("nvlinks.1.errors.") for k in keys)
    assert [k for k in sorted(keys) if not names_a_field(k)] == []


def v1_document(snap: Snapshot) -> dict[str, Any]:
    """``snap`` as the v1 reader wrote it: its reasons under the v1 names, spelled out here
    as that reader spelled them (not derived from agent/model/upgrade.py)."""
    v1_names = {"temperature_c": "temperature", "mig_enabled": "mig_mode",
                "ecc_volatile_uncorrected": "ecc_dbe_volatile",
                "pcie_width_current": "pcie_width", "nvlinks": "nvlink",
                "retired_pages_sbe": "retired_sbe", "retired_pages_dbe": "retired_dbe",
                "nvlinks.2.active": "nvlink2.state", "nvlinks.2.errors.crc": "nvlink2.crc"}
    data = snap.to_dict()
    data["schema"] = "clusterdiag/snapshot/v1"
    for gpu in data["nvml"]["gpus"]:
        for reasons in (gpu["unsupported"], gpu["errors"]):
            for new, old in v1_names.items():
                if new in reasons:
                    reasons[old] = reasons.pop(new)
    return data


def with_reasons(snap: Snapshot) -> Snapshot:
    """A healthy snapshot given reasons of every kind the v1 names covered."""
    assert snap.nvml is not None
    gpus = snap.nvml.gpus
    gpus[0].temperature_c = None
    gpus[0].errors["temperature_c"] = "Unknown: Unknown Error"
    gpus[1].mig_enabled = gpus[1].mig_pending = None
    gpus[1].unsupported["mig_enabled"] = "NotSupported"
    gpus[2].ecc_volatile_uncorrected = None
    gpus[2].unsupported["ecc_volatile_uncorrected"] = "NotSupported"
    gpus[3].pcie_width_current = None
    gpus[3].unsupported["pcie_width_current"] = "NoPermission"
    gpus[4].retired_pages_sbe = gpus[4].retired_pages_dbe = None
    gpus[4].unsupported.update(retired_pages_sbe="NotSupported", retired_pages_dbe="NotSupported")
    gpus[5].nvlinks = []
    gpus[5].unsupported["nvlinks"] = "NotSupported"
    gpus[6].errors["nvlinks.2.active"] = "Unknown"
    gpus[6].errors["nvlinks.2.errors.crc"] = "Unknown"
    return snap


def judged(snap: Snapshot) -> list[tuple[str, str, str, str, str]]:
    report = evaluate(snap, Config(), RunOptions(profile="dgx-h100"))
    return [(f.check, f.component, f.status.value, f.message, json.dumps(f.observed))
            for f in report.findings]


def test_a_v1_snapshot_loads_with_its_keys_renamed_and_is_judged_as_its_v2_twin(
        tmp_path: Path) -> None:
    snap = with_reasons(collect_snapshot(env_for(NodeSpec("n1", "dgx-h100")), ["nvml", "pci"],
                                         time.monotonic() + 20))
    old = tmp_path / "v1.json"
    old.write_text(json.dumps(v1_document(snap)))
    loaded = load_snapshot(old)
    assert loaded.schema == SNAPSHOT_SCHEMA == "clusterdiag/snapshot/v2"
    assert loaded.nvml is not None
    assert loaded.nvml.gpus[0].errors == {"temperature_c": "Unknown: Unknown Error"}
    assert loaded.nvml.gpus[6].errors == {"nvlinks.2.active": "Unknown",
                                          "nvlinks.2.errors.crc": "Unknown"}
    loaded.schema = snap.schema
    assert loaded == snap
    twin = judged(snap)
    assert judged(loaded) == twin
    # the renamed reasons are what these checks judge by
    for finding in (
            ("gpu.temperature", "gpu0", "skip",
             "GPU temperature could not be read (see gpu.responsive)", '"Unknown: Unknown Error"'),
            ("gpu.mig_mode", "gpu1", "skip", "MIG mode not supported on this GPU or driver",
             '"NotSupported"'),
            ("gpu.ecc_uncorrected", "gpu2", "skip",
             "volatile uncorrected ECC count not supported on this GPU or driver",
             '"NotSupported"'),
            ("gpu.retired_pages", "gpu4", "skip",
             "page retirement not supported on this GPU or driver", '"NotSupported"'),
            ("nvlink.links_up", "gpu5", "skip", "NVLink not supported on this GPU", "null")):
        assert finding in twin


def test_a_v2_snapshot_round_trips_through_a_file(tmp_path: Path) -> None:
    snap = with_reasons(collect_snapshot(env_for(NodeSpec("n1", "dgx-h100")), ["nvml", "pci"],
                                         time.monotonic() + 20))
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(snap.to_dict()))
    assert json.loads(path.read_text())["schema"] == "clusterdiag/snapshot/v2"
    assert load_snapshot(path) == snap


def test_the_real_v1_capture_reads_with_its_page_retirement_and_nvlink_unsupported() -> None:
    snap = Snapshot.from_dict(json.loads(REAL_V1.read_text()))
    assert json.loads(REAL_V1.read_text())["schema"] == "clusterdiag/snapshot/v1"
    assert snap.nvml is not None
    assert snap.nvml.gpus[0].unsupported == {
        "retired_pages_sbe": "NotSupported", "retired_pages_dbe": "NotSupported",
        "retired_pending": "NotSupported", "nvlink_count": "NotSupported",
        "nvlinks": "NotSupported"}
    report = evaluate(snap, Config(), RunOptions())
    retired = [f for f in report.findings if f.check == "gpu.retired_pages"]
    assert [(f.status, f.message) for f in retired] == [
        (Status.SKIP, "page retirement not supported on this GPU or driver")]


@pytest.mark.parametrize("reasons", [
    [1, 2], "temperature", {"temperature": 7}, {"nvlink99999.crc": "x"}])
def test_a_v1_file_of_the_wrong_shape_is_one_line_not_a_traceback(
        tmp_path: Path, reasons: Any) -> None:
    data = json.loads(REAL_V1.read_text())
    data["nvml"]["gpus"][0]["errors"] = reasons
    data["nvml"]["gpus"][0]["unsupported"] = reasons
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    if isinstance(reasons, dict) and all(isinstance(v, str) for v in reasons.values()):
        gpu = load_snapshot(path).nvml.gpus[0]  # type: ignore[union-attr]
        assert gpu.errors == reasons  # no field of that name: kept as it came
        return
    with pytest.raises(UsageError, match=r"malformed snapshot: .*gpus\[0\]\.(errors|unsupp)"):
        load_snapshot(path)


def test_both_spellings_in_one_hostile_v1_file_keep_the_v2_one(tmp_path: Path) -> None:
    data = json.loads(REAL_V1.read_text())
    data["nvml"]["gpus"][0]["errors"] = {"temperature": "old", "temperature_c": "new"}
    path = tmp_path / "both.json"
    path.write_text(json.dumps(data))
    gpu = load_snapshot(path).nvml.gpus[0]  # type: ignore[union-attr]
    assert gpu.errors == {"temperature_c": "new"}
