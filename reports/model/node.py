"""The node report (schema clusterdiag/node-report/v1): what one node run concluded."""

from __future__ import annotations

import time
from typing import Any

from ...agent.model import Snapshot
from ...agent.model.record import field, record
from ...checks.core.finding import Finding, Status, worst
from .facts import cluster_facts

NODE_SCHEMA = "clusterdiag/node-report/v1"


@record
class NodeReport:
    """One node's verdict: its findings and what was read to reach them, as every
    renderer and the cluster merge take it."""

    node: str
    profile: dict[str, Any]
    version: str
    started_at: str
    duration_s: float
    level: str
    mode: str
    findings: list[Finding]
    inventory: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, Any] = field(default_factory=dict)
    simulated: bool = False

    @property
    def verdict(self) -> Status:
        return worst(f.status for f in self.findings)

    def failures(self) -> list[Finding]:
        return [f for f in self.findings if f.status is Status.FAIL]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": NODE_SCHEMA,
            "node": self.node,
            "profile": self.profile,
            "version": self.version,
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "level": self.level,
            "mode": self.mode,
            "simulated": self.simulated,
            "verdict": self.verdict.value,
            "inventory": self.inventory,
            "sources": self.sources,
            "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeReport:
        return cls(
            node=str(data["node"]), profile=dict(data["profile"]), version=str(data["version"]),
            started_at=str(data["started_at"]), duration_s=float(data["duration_s"]),
            level=str(data.get("level", "quick")), mode=str(data.get("mode", "run")),
            findings=[Finding.from_dict(f) for f in data["findings"]],
            inventory=dict(data.get("inventory") or {}), sources=dict(data.get("sources") or {}),
            simulated=bool(data.get("simulated", False)),
        )


def iso(timestamp: float) -> str:
    """``timestamp`` in ISO 8601, UTC, to the second, as ``datetime``'s ``isoformat`` writes
    it: from ``time.gmtime``, since importing ``datetime`` costs the prolog ~2 ms."""
    t = time.gmtime(timestamp)
    return (f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}"
            f"T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}+00:00")


def inventory(snap: Snapshot) -> dict[str, Any]:
    """What the node is made of, for humans and for cross-node version comparison."""
    inv: dict[str, Any] = {"gpus": [], "hcas": [], "driver": None, "cuda": None,
                           "nccl": None, "kernel": None}
    if snap.host is not None:
        inv["kernel"] = snap.host.kernel_release
    if snap.nvml is not None:
        inv["driver"] = snap.nvml.driver_version
        cuda = snap.nvml.cuda_driver_version
        inv["cuda"] = f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None
        inv["gpus"] = [{"index": g.index, "model": g.name, "uuid": g.uuid, "bus_id": g.pci_bdf,
                        "vbios": g.vbios} for g in snap.nvml.gpus]
    if snap.infiniband is not None:
        inv["hcas"] = [{"name": d.name, "firmware": d.fw_ver,
                        "rate_gbps": [p.rate_gbps for p in d.ports],
                        "role": d.role, "role_reason": d.role_reason, "type": d.hca_type,
                        "pci_bdf": d.pci_bdf}
                       for d in snap.infiniband]
    if snap.nccl is not None:
        inv["nccl"] = snap.nccl.version
    inv.update(cluster_facts(snap))
    return inv
