"""A node report folded for the cluster view: counts of passes, the problems in full, and
the facts the cross-node checks compare.

A cluster report may hold 10,000 nodes of ~200 findings each, so a node's passes and
skips become counts here and only its problems are kept. A report is trusted after a
cheap check of its schema tag and required keys (not full JSON Schema validation): the
tag says who wrote it, and anything else malformed still becomes a one-line reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..checks.finding import Finding, Status
from .node import NODE_SCHEMA

REQUIRED = ("schema", "node", "profile", "version", "started_at", "duration_s", "verdict",
            "inventory", "findings")
NODE_SCHEMA_PREFIX = "clusterdiag/node-report/"
STATUSES = tuple(s.value for s in Status)
NOT_READY = (Status.FAIL, Status.ERROR)


class BadReport(ValueError):
    """Why an answer or a file is not a node report we read; stable text (no node names),
    so that the same trouble on many nodes groups into one line."""


@dataclass
class NodeFacts:
    """What the cross-node checks compare; read from the report's inventory."""

    driver: str | None = None
    cuda: str | None = None
    nccl: str | None = None
    kernel: str | None = None
    vbios: str | None = None
    hca_firmware: str | None = None
    fabric: list[dict[str, Any]] = field(default_factory=list)
    rails: list[dict[str, Any]] = field(default_factory=list)
    telemetry: dict[str, float] = field(default_factory=dict)


@dataclass
class NodeSummary:
    node: str
    profile: str
    version: str
    verdict: Status  # the node's own verdict, before cluster checks
    gpus: int
    counts: dict[str, int]
    problems: list[Finding]  # warn, fail and error findings
    facts: NodeFacts = field(default_factory=NodeFacts)
    answered: bool = True  # False: a placeholder for a node that gave no usable report
    rack: str | None = None  # set by cluster.nvl_domain for NVL72 trays

    @property
    def ready(self) -> bool:
        return self.answered and self.verdict not in NOT_READY

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "profile": self.profile, "version": self.version,
                "verdict": self.verdict.value, "answered": self.answered, "gpus": self.gpus,
                "rack": self.rack, "counts": self.counts,
                "findings": [f.to_dict() for f in self.problems]}


def unanswered(node: str) -> NodeSummary:
    return NodeSummary(node=node, profile="unknown", version="", verdict=Status.FAIL, gpus=0,
                       counts=dict.fromkeys(STATUSES, 0), problems=[], answered=False)


def _joined(values: list[Any]) -> str | None:
    unique = sorted({str(v) for v in values if v not in (None, "")})
    return ",".join(unique) if unique else None


_SCALARS = (str, int, float, bool, type(None))
# The fields the cross-node checks compare, and the type each must have there: they group
# and count these values, so a list where a string belongs would crash the whole report.
_RECORDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "fabric": {"gpu": int, "state": _SCALARS, "cluster_uuid": _SCALARS,
               "clique_id": (int, type(None))},
    "rails": {"gpu": int, "subnet": _SCALARS, "rate_gbps": _SCALARS}}


def _records(inventory: dict[str, Any], key: str) -> list[dict[str, Any]]:
    items = inventory.get(key) or []
    fields = _RECORDS[key]
    if not isinstance(items, list) or not all(
            isinstance(item, dict) and all(isinstance(item.get(name), kind)
                                           for name, kind in fields.items())
            for item in items):
        raise BadReport(f"node report has a malformed inventory.{key}")
    return items


def _telemetry(inventory: dict[str, Any]) -> dict[str, float]:
    values = inventory.get("telemetry") or {}
    try:
        if isinstance(values, dict) and all(isinstance(v, (int, float)) for v in values.values()):
            return {str(k): float(v) for k, v in values.items()}
    except OverflowError:  # an integer beyond any float
        pass
    raise BadReport("node report has a malformed inventory.telemetry")


def _facts(inventory: dict[str, Any]) -> NodeFacts:
    gpus = inventory.get("gpus") or []
    hcas = inventory.get("hcas") or []
    if not isinstance(gpus, list) or not isinstance(hcas, list):
        raise BadReport("node report has a malformed inventory.gpus or inventory.hcas")
    return NodeFacts(
        driver=inventory.get("driver"), cuda=inventory.get("cuda"), nccl=inventory.get("nccl"),
        kernel=inventory.get("kernel"),
        vbios=_joined([g.get("vbios") for g in gpus if isinstance(g, dict)]),
        hca_firmware=_joined([h.get("firmware") for h in hcas if isinstance(h, dict)]),
        fabric=_records(inventory, "fabric"), rails=_records(inventory, "rails"),
        telemetry=_telemetry(inventory),
    )


def check_tag(data: Any) -> dict[str, Any]:
    """The report as a dict when its tag and required keys are there; BadReport if not."""
    if not isinstance(data, dict):
        raise BadReport("not a node report (not a JSON object)")
    tag = data.get("schema")
    if tag != NODE_SCHEMA:
        if isinstance(tag, str) and tag.startswith(NODE_SCHEMA_PREFIX):
            raise BadReport(f"node report schema {tag} is not one this clusterdiag reads "
                            f"({NODE_SCHEMA})")
        raise BadReport("not a clusterdiag node report (no schema tag)")
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise BadReport(f"node report lacks required key(s) {', '.join(missing)}")
    return data


def summarize(data: Any) -> NodeSummary:
    """Fold one node report (a parsed JSON object) into its summary."""
    report = check_tag(data)
    counts = dict.fromkeys(STATUSES, 0)
    problems: list[Finding] = []
    try:
        for item in report["findings"]:
            status = item["status"]
            counts[status] += 1
            if status != "pass" and status != "skip":
                problems.append(Finding.from_dict(item))
        node, profile = report["node"], report["profile"]["name"]
        if not isinstance(node, str) or not isinstance(profile, str):
            # str() would turn a null node into a node called "None" in the cluster report
            raise BadReport("node report's node or profile name is not a string")
        verdict = Status(report["verdict"])
        inventory = report["inventory"]
        facts = _facts(inventory)
        gpus = len(inventory.get("gpus") or [])
    except BadReport:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BadReport(f"malformed node report ({type(exc).__name__})") from None
    if not node:
        raise BadReport("node report names no node")
    return NodeSummary(node=node, profile=profile, version=str(report["version"]),
                       verdict=verdict, gpus=gpus, counts=counts, problems=problems,
                       facts=facts)
