"""/metrics labels that join with dcgm-exporter's and node_exporter's series, read from a
simulated DGX H100 collected through the real collectors."""

from __future__ import annotations

import re
import socket
import time
from collections import Counter
from functools import cache
from typing import Any

import pytest
from prometheus_client import generate_latest

from clusterdiag.agent.daemon.metric_labels import (
    NODE_EXPORTER_IB_COUNTERS,
    MetricSettings,
    nvml_bus_id,
    settings_from,
)
from clusterdiag.agent.daemon.metrics import AgentView, registry_for
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.run.collect import SOURCES, collect_snapshot
from clusterdiag.agent.run.runner import RunOptions, evaluate
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.reports.model.node import NodeReport

DCGM_EXPORTER_GPU_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname"}
SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@cache
def _collected() -> tuple[Snapshot, NodeReport, list[dict[str, Any]]]:
    env = env_for(NodeSpec("n7", "dgx-h100"))
    snap = collect_snapshot(env, list(SOURCES), time.monotonic() + 30, "quick")
    report = evaluate(snap, Config(), RunOptions(profile="dgx-h100"))
    module = env.nvml()
    module.nvmlInit()
    nvml = []
    for i in range(module.nvmlDeviceGetCount()):
        handle = module.nvmlDeviceGetHandleByIndex(i)
        bus = module.nvmlDeviceGetPciInfo(handle).busId
        nvml.append({"index": i, "busId": bus.decode() if isinstance(bus, bytes) else bus,
                     "uuid": _text(module.nvmlDeviceGetUUID(handle)),
                     "name": _text(module.nvmlDeviceGetName(handle))})
    return snap, report, nvml


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _scrape(settings: MetricSettings, xids: dict[tuple[str, str], int] | None = None
            ) -> list[tuple[str, dict[str, str]]]:
    snap, report, _ = _collected()
    view = AgentView(snapshot=snap, report=report, settings=settings,
                     xid_counts=Counter(xids or {}))
    text = generate_latest(registry_for(lambda: view)).decode()
    series = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            match = SERIES.match(line)
            assert match, line
            series.append((match[1], dict(LABEL.findall(match[2] or ""))))
    return series


def test_gpu_series_carry_dcgm_exporters_labels_with_nvmls_values() -> None:
    _, _, nvml = _collected()
    series = _scrape(MetricSettings(hostname="gpu-node-7"))
    gpu_series = [labels for name, labels in series if name.startswith("clusterdiag_gpu_")]
    assert gpu_series
    for labels in gpu_series:
        assert set(labels) >= DCGM_EXPORTER_GPU_LABELS, labels
    responsive = {labels["gpu"]: labels for name, labels in series
                  if name == "clusterdiag_gpu_responsive"}
    assert sorted(responsive) == [str(g["index"]) for g in nvml]
    for gpu in nvml:
        labels = responsive[str(gpu["index"])]
        # what DCGM reads from NVML, byte for byte: the join key must match exactly
        assert labels["pci_bus_id"] == gpu["busId"]
        assert re.fullmatch(r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]", labels["pci_bus_id"])
        assert labels["UUID"] == gpu["uuid"]
        assert labels["UUID"].startswith("GPU-")
        assert labels["modelName"] == gpu["name"] == "NVIDIA H100 80GB HBM3"
        assert labels["device"] == f"nvidia{gpu['index']}"
        assert labels["Hostname"] == "gpu-node-7"


def test_no_hostname_and_model_name_dashes_follow_dcgm_exporters_flags() -> None:
    series = _scrape(MetricSettings(hostname=None, replace_blanks_in_model_name=True))
    temps = [labels for name, labels in series
             if name == "clusterdiag_gpu_temperature_celsius"]
    assert len(temps) == 8
    assert all("Hostname" not in t and t["modelName"] == "NVIDIA-H100-80GB-HBM3" for t in temps)


def test_xid_series_have_the_gpus_identity_even_for_a_gpu_now_missing() -> None:
    series = _scrape(MetricSettings(hostname="h"),
                     {("2", "79"): 3, ("9", "48"): 1, ("", "13"): 1})
    xids = {(labels["gpu"], labels["code"]): labels
            for name, labels in series if name == "clusterdiag_xid_events_total"}
    assert set(xids) == {("2", "79"), ("9", "48"), ("", "13")}
    assert xids[("2", "79")]["UUID"].startswith("GPU-")
    assert xids[("2", "79")]["device"] == "nvidia2"
    # no GPU 9 in this snapshot: index and node still known, identity empty (to Prometheus,
    # an empty label is no label)
    assert xids[("9", "48")]["device"] == "nvidia9"
    assert xids[("9", "48")]["UUID"] == ""
    assert xids[("9", "48")]["Hostname"] == "h"


def test_ib_series_use_node_exporters_labels_and_the_switch_drops_its_counters() -> None:
    on = _scrape(MetricSettings())
    off = _scrape(MetricSettings(ib_node_exporter_counters=False))
    ib_on = [(n, labels) for n, labels in on if n.startswith("clusterdiag_ib_")]
    assert ib_on
    assert all({"device", "port"} <= set(labels) and "hca" not in labels
                         for _, labels in ib_on)
    assert {labels["device"] for _, labels in ib_on} >= {"mlx5_0"}

    def counters(series: list[tuple[str, dict[str, str]]], group: str) -> set[str]:
        return {labels["counter"] for n, labels in series
                if n == "clusterdiag_ib_port_events_total" and labels["group"] == group}

    assert counters(on, "port") & NODE_EXPORTER_IB_COUNTERS
    assert not counters(off, "port") & NODE_EXPORTER_IB_COUNTERS
    assert not any(n == "clusterdiag_ib_port_data_bytes_total" for n, _ in off)
    assert any(n == "clusterdiag_ib_port_data_bytes_total" for n, _ in on)
    # hw_counters are not exported by node_exporter: they stay either way
    assert counters(off, "hw") == counters(on, "hw")
    assert "local_ack_timeout_err" in counters(on, "hw")
    # the kept port state is ours, not node_exporter's counters
    assert sum(n == "clusterdiag_ib_port_active" for n, _ in off) == \
        sum(n == "clusterdiag_ib_port_active" for n, _ in on) > 0


def test_a_setting_is_never_exported_as_a_counter() -> None:
    snap, _, _ = _collected()
    assert snap.infiniband is not None
    assert any("lifespan" in p.hw_counters for d in snap.infiniband for p in d.ports)
    assert not any(labels.get("counter") == "lifespan" for n, labels in _scrape(MetricSettings()))


def test_build_and_node_info() -> None:
    snap, _, _ = _collected()
    series = dict(_scrape(MetricSettings(hostname="gpu-node-7")))
    assert series["clusterdiag_build_info"]["version"]
    info = series["clusterdiag_node_info"]
    assert snap.nvml is not None
    assert snap.nccl is not None
    assert snap.nvml.cuda_driver_version == 13010  # NVML's encoding of CUDA 13.1
    assert info == {"node": "n7", "profile": "dgx-h100", "Hostname": "gpu-node-7",
                    "driver_version": snap.nvml.driver_version, "cuda_version": "13.1",
                    "nccl_version": snap.nccl.version}
    assert info["driver_version"]
    assert info["nccl_version"]


@pytest.mark.parametrize(("bdf", "bus_id"), [
    ("0000:1b:00.0", "00000000:1B:00.0"), ("0001:ca:00.3", "00000001:CA:00.3"),
    ("garbage", ""), (None, "")])
def test_nvml_bus_id(bdf: str | None, bus_id: str) -> None:
    assert nvml_bus_id(bdf) == bus_id


def test_hostname_setting_follows_dcgm_exporters_rule() -> None:
    section = Config().section("metrics")
    assert section["hostname"] == "auto"
    assert section["ib_node_exporter_counters"] is True
    real = settings_from(section, "slurm-name", False, {"NODE_NAME": "k8s-node"})
    assert real.hostname == "k8s-node"
    assert settings_from(section, "slurm-name", False, {}).hostname == socket.gethostname()
    assert settings_from(section, "n3", True, {"NODE_NAME": "x"}).hostname == "n3"
    assert settings_from({**section, "hostname": ""}, "n3", False, {}).hostname is None
    assert settings_from({**section, "hostname": "gpu001"}, "n3", False, {}).hostname == "gpu001"
