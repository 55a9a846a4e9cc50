"""``GET /metrics``: the latest snapshot and report as Prometheus series.

A custom collector builds every family from the agent's current state at scrape time, so
a GPU or port that disappeared disappears from the output too (no stale series, as a set
of long-lived Gauges would leave), and each series is emitted exactly once. Names carry
the ``clusterdiag_`` prefix and their unit; counters end in ``_total`` and count events,
never settings. GPU and InfiniBand series carry dcgm-exporter's and node_exporter's
identifying labels (metric_labels.py) so dashboards can join them with those exporters'.
"""

from __future__ import annotations

import functools
import gzip
import platform
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...checks.core.finding import Status, worst
from ...reports.model.node import NodeReport
from ..base.inert import shown
from ..health.lifecycle import Health, State
from ..health.store import HealthFile
from ..model import Snapshot
from ..model.version import VERSION
from .exposition import COUNTER, GAUGE, Family, text
from .metric_labels import (
    IB_LABELS,
    IB_SETTING_FILES,
    NODE_EXPORTER_IB_COUNTERS,
    MetricSettings,
    gpu_label_values,
)

STATUSES = [s.value for s in (Status.PASS, Status.WARN, Status.FAIL, Status.ERROR, Status.SKIP)]


@dataclass
class AgentView:
    """What a scrape reads: set by the agent after each collection."""

    snapshot: Snapshot | None = None
    report: NodeReport | None = None
    xid_counts: Counter[tuple[str, str]] = field(default_factory=Counter)  # (gpu index, code)
    collections: int = 0
    collection_errors: int = 0
    nvml_calls: int = 0
    last_success: float | None = None
    state_write_errors: int = 0
    state_writable: bool = True
    settings: MetricSettings = field(default_factory=MetricSettings)
    health: HealthFile | None = None  # the lifecycle file (agent/health/store.py)

    def version(self) -> tuple[Any, ...]:
        """Changes whenever a scrape would see something different (every field above is
        only ever replaced or counted up), so the rendered text can be reused until then;
        the health file by its stamp, and each second while an incident is on record
        (``health_seconds_since_incident`` counts up)."""
        health = None
        if self.health is not None:
            current = self.health.current()
            health = (self.health.stamp(), int(time.time()) if current.incidents else None)
        return (id(self.snapshot), id(self.report), self.collections, self.collection_errors,
                self.nvml_calls, self.last_success, sum(self.xid_counts.values()),
                len(self.xid_counts), self.state_write_errors, self.state_writable,
                self.settings, health)


def _gauge(name: str, doc: str, labels: list[str]) -> Family:
    return Family(f"clusterdiag_{name}", doc, GAUGE, labels)


class SnapshotCollector:
    def __init__(self, view: Callable[[], AgentView]) -> None:
        self.view = view

    def collect(self) -> Iterator[Family]:
        for metric in self._families():
            yield _inert(metric)

    def text(self) -> bytes:
        """The /metrics body (exposition.py)."""
        return text(self.collect())

    def _families(self) -> Iterator[Family]:
        view = self.view()
        build = _gauge("build_info", "Always 1: the clusterdiag version serving these metrics.",
                       ["version", "python_version"])
        build.add_metric([VERSION, platform.python_version()], 1)
        yield build
        yield from self._agent(view)
        if view.report is not None:
            yield self._node_info(view.report, view.snapshot, view.settings)
            yield from self._checks(view.report)
        snap = view.snapshot
        if snap is not None:
            yield from self._sources(snap)
            if snap.nvml is not None:
                yield from self._gpus(snap, view.settings)
            if snap.infiniband:
                yield from self._ib(snap, view.settings)
        yield self._xids(view)
        if view.health is not None:
            yield from _health(view.health.current(), time.time())

    def _node_info(self, report: NodeReport, snap: Snapshot | None,
                   settings: MetricSettings) -> Family:
        """One series to join per node (``on(instance) group_left(node)``): what it runs."""
        nvml = snap.nvml if snap is not None else None
        cuda = nvml.cuda_driver_version if nvml is not None else None
        labels = {"node": report.node, "profile": str(report.profile.get("name") or ""),
                  "driver_version": (nvml.driver_version or "") if nvml is not None else "",
                  "cuda_version": f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else "",
                  "nccl_version": (snap.nccl.version or "") if snap is not None and
                  snap.nccl is not None else ""}
        if settings.hostname is not None:
            labels["Hostname"] = settings.hostname
        info = _gauge("node_info", "Always 1: the node, its platform profile and the driver, "
                                   "CUDA and NCCL versions it runs.", list(labels))
        info.add_metric(list(labels.values()), 1)
        return info

    def _xids(self, view: AgentView) -> Family:
        settings = view.settings
        nvml = view.snapshot.nvml if view.snapshot is not None else None
        by_index = {g.index: g for g in nvml.gpus} if nvml is not None else {}
        xid = Family("clusterdiag_xid_events",
                     "NVML XID events the agent recorded, by GPU and code.",
                     COUNTER, [*settings.gpu_label_names, "code"])
        for (gpu, code), n in sorted(view.xid_counts.items()):
            index = int(gpu) if gpu.isdigit() else None
            xid.add_metric([*gpu_label_values(index, by_index.get(index) if index is not None
                                              else None, settings), code], n)
        return xid

    def _agent(self, view: AgentView) -> Iterator[Family]:
        runs = Family("clusterdiag_collections", "Collections the agent ran.", COUNTER)
        runs.add_metric([], view.collections)
        yield runs
        errs = Family("clusterdiag_collection_errors",
                      "Collections that failed before producing a report.", COUNTER)
        errs.add_metric([], view.collection_errors)
        yield errs
        calls = Family("clusterdiag_nvml_calls", "NVML calls made by collections.", COUNTER)
        calls.add_metric([], view.nvml_calls)
        yield calls
        writes = Family("clusterdiag_state_write_errors",
                        "State-directory writes that failed (disk full, "
                        "read-only); the agent serves from memory meanwhile.", COUNTER)
        writes.add_metric([], view.state_write_errors)
        yield writes
        writable = _gauge("state_writable", "1 when the latest state-directory write "
                                            "succeeded.", [])
        writable.add_metric([], 1 if view.state_writable else 0)
        yield writable
        if view.report is not None:
            dur = _gauge("collection_duration_seconds", "Wall time of the latest collection.", [])
            dur.add_metric([], view.report.duration_s)
            yield dur
        if view.last_success is not None:
            last = _gauge("last_collection_timestamp_seconds",
                          "When the latest report was finished (Unix time).", [])
            last.add_metric([], view.last_success)
            yield last

    def _checks(self, report: NodeReport) -> Iterator[Family]:
        ready = _gauge("node_ready", "1 when no check fails or errors (the prolog's verdict).",
                       [])
        ready.add_metric([], 0 if report.verdict in (Status.FAIL, Status.ERROR) else 1)
        yield ready
        by_check: dict[str, list[Status]] = {}
        for f in report.findings:
            by_check.setdefault(f.check, []).append(f.status)
        status = _gauge("check_status", "1 for each check's current worst status, 0 otherwise.",
                        ["check", "status"])
        for check in sorted(by_check):
            current = worst(by_check[check]).value
            for value in STATUSES:
                status.add_metric([check, value], 1 if value == current else 0)
        yield status
        counts = _gauge("findings", "Findings in the latest report, by status.", ["status"])
        tally = Counter(f.status.value for f in report.findings)
        for value in STATUSES:
            counts.add_metric([value], tally[value])
        yield counts

    def _sources(self, snap: Snapshot) -> Iterator[Family]:
        secs = _gauge("source_duration_seconds", "Time each source took in the latest collection.",
                      ["source"])
        up = _gauge("source_up", "1 when the source was collected (not timed out or errored).",
                    ["source"])
        for name, stats in sorted(snap.sources.items()):
            secs.add_metric([name], stats.seconds)
            up.add_metric([name], 1 if stats.status == "ok" else 0)
        yield secs
        yield up

    def _gpus(self, snap: Snapshot, settings: MetricSettings) -> Iterator[Family]:
        assert snap.nvml is not None
        labels = settings.gpu_label_names
        temp = _gauge("gpu_temperature_celsius", "GPU core temperature.", labels)
        slow = _gauge("gpu_slowdown_temperature_celsius", "Temperature where the GPU slows down.",
                      labels)
        power = _gauge("gpu_power_watts", "GPU power draw.", labels)
        limit = _gauge("gpu_power_limit_watts", "Enforced GPU power limit.", labels)
        ecc = Family("clusterdiag_gpu_ecc_errors",
                     "ECC errors, volatile (since the driver loaded) and aggregate "
                     "(lifetime).", COUNTER, [*labels, "type", "scope"])
        links_up = _gauge("gpu_nvlinks_active", "NVLinks up on the GPU.", labels)
        link_state = _gauge("gpu_nvlink_up", "1 when the NVLink is active.", [*labels, "link"])
        link_err = Family("clusterdiag_gpu_nvlink_errors",
                          "NVLink error counters, by NVML counter name.",
                          COUNTER, [*labels, "link", "counter"])
        responsive = _gauge("gpu_responsive", "1 when every NVML call on the GPU returned.",
                            labels)
        for gpu in snap.nvml.gpus:
            lab = gpu_label_values(gpu.index, gpu, settings)
            responsive.add_metric(lab, 1 if gpu.responsive and not gpu.lost else 0)
            _maybe(temp, lab, gpu.temperature_c)
            _maybe(slow, lab, gpu.slowdown_temperature_c)
            _maybe(power, lab, gpu.power_draw_w)
            _maybe(limit, lab, gpu.power_limit_w)
            for kind, scope, value in (
                    ("corrected", "volatile", gpu.ecc_volatile_corrected),
                    ("uncorrected", "volatile", gpu.ecc_volatile_uncorrected),
                    ("corrected", "aggregate", gpu.ecc_aggregate_corrected),
                    ("uncorrected", "aggregate", gpu.ecc_aggregate_uncorrected)):
                _maybe(ecc, [*lab, kind, scope], value)
            if gpu.nvlinks:
                links_up.add_metric(lab, sum(1 for link in gpu.nvlinks if link.active))
            for link in gpu.nvlinks:
                link_lab = [*lab, str(link.link)]
                if link.active is not None:
                    link_state.add_metric(link_lab, 1 if link.active else 0)
                for name, value in sorted(link.errors.items()):
                    _maybe(link_err, [*link_lab, name], value)
        yield from (responsive, temp, slow, power, limit, ecc, links_up, link_state, link_err)

    def _ib(self, snap: Snapshot, settings: MetricSettings) -> Iterator[Family]:
        labels = IB_LABELS
        up = _gauge("ib_port_active", "1 when the port is ACTIVE and LinkUp.", labels)
        rate = _gauge("ib_port_rate_bytes_per_second", "Negotiated port rate.", labels)
        data = Family("clusterdiag_ib_port_data_bytes",
                      "Bytes through the port (port_xmit_data/port_rcv_data).",
                      COUNTER, [*labels, "direction"])
        errors = Family("clusterdiag_ib_port_events",
                        "Port counters (errors, packets, wait ticks) under the "
                        "kernel's file names; group port = counters/, hw = "
                        "hw_counters/.", COUNTER, [*labels, "group", "counter"])
        directions = {"port_xmit_data": "transmit", "port_rcv_data": "receive"}
        for dev in snap.infiniband or []:
            for port in dev.ports:
                lab = [dev.name, str(port.port)]
                up.add_metric(lab, 1 if port.state == "ACTIVE" and port.phys_state == "LinkUp"
                              else 0)
                if port.rate_gbps is not None:
                    rate.add_metric(lab, port.rate_gbps * 1e9 / 8)
                for group, values in (("port", port.counters), ("hw", port.hw_counters)):
                    for name, value in sorted(values.items()):
                        if name in IB_SETTING_FILES or (
                                group == "port" and not settings.ib_node_exporter_counters
                                and name in NODE_EXPORTER_IB_COUNTERS):
                            continue
                        if group == "port" and name in directions:
                            _maybe(data, [*lab, directions[name]], value)
                        else:
                            _maybe(errors, [*lab, group, name], value)
        yield from (up, rate, data, errors)


def _health(health: Health, now: float) -> Iterator[Family]:
    """The node's lifecycle (docs/return-to-service.md): its state one-hot, drains per
    fault family since the file began, and the time since the latest one."""
    state = _gauge("health_state", "1 for the node's lifecycle state (healthy, drained, "
                                   "validating, held), 0 for the others.", ["state"])
    for value in State:
        state.add_metric([value.value], 1 if value is health.state else 0)
    yield state
    incidents = Family("clusterdiag_health_incidents",
                       "Drains recorded in the node's lifecycle, by fault family.",
                       COUNTER, ["family"])
    for family, count in sorted(health.totals.items()):
        incidents.add_metric([family], count)
    yield incidents
    if health.incidents:
        since = _gauge("health_seconds_since_incident",
                       "Seconds since the node's latest drain.", [])
        since.add_metric([], max(0.0, now - health.incidents[-1].at))
        yield since


def _maybe(family: Any, labels: list[str], value: float | int | None) -> None:
    if value is not None:
        family.add_metric(labels, value)


def _inert(metric: Family) -> Family:
    """``metric`` with every label value shown inert: node names, profile and driver
    versions, GPU and port names come from the snapshot and the report, and the exposition
    format escapes only backslash, double quote and line feed in a label value
    (https://prometheus.io/docs/instrumenting/exposition_formats/#text-format-details), so
    an ESC or U+202E would reach a scraper's terminal or dashboard as it is."""
    if any(not value.isprintable() for sample in metric.samples
           for value in sample.labels.values()):
        metric.samples = [sample._replace(labels={name: shown(value) for name, value
                                                  in sample.labels.items()})
                          for sample in metric.samples]
    return metric


def accepts_gzip(header: str | None) -> bool:
    """Whether an ``Accept-Encoding`` header accepts gzip: Prometheus asks for it on every
    scrape unless a job sets ``enable_compression: false`` (prometheus/prometheus#13166),
    and the text format allows it (``Optional HTTP Content-Encoding: gzip``,
    https://prometheus.io/docs/instrumenting/exposition_formats/#basic-info). A coding with
    ``q=0`` is refused (RFC 9110 section 12.5.3); ``x-gzip`` is gzip (section 8.4.1.3)."""
    for item in (header or "").split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        if coding.lower() in ("gzip", "x-gzip"):
            weight = next((p[2:] for p in params if p.lower().startswith("q=")), "1")
            try:
                return float(weight) > 0
            except ValueError:
                return False
    return False


@functools.lru_cache(maxsize=1)
def gzipped(body: bytes) -> bytes:
    """``body`` compressed once per change of what it shows, not once per scrape: every
    scraper of a node is sent the same text (``metrics_body`` keeps it until it changes).
    Level 6, zlib's default: a simulated dgx-h100's 224 KB becomes 10 KB."""
    return gzip.compress(body, compresslevel=6, mtime=0)


def registry_for(view: Callable[[], AgentView]) -> SnapshotCollector:
    """The families of what ``view`` returns at each scrape, all of them ours; its
    ``collect`` is what ``prometheus_client.generate_latest`` reads of a registry."""
    return SnapshotCollector(view)
