"""A node report folded for the cluster view: counts of passes, the problems in full, and
the facts the cross-node checks compare.

A cluster report may hold 10,000 nodes of ~300 findings each, so a node's passes and
skips become counts here and only its problems are kept, as Finding objects: a pass or
skip is checked for its shape (an object, a known status and action, bounded strings) and
counted, never built, and its observed and expected values, which nothing reads, are not
walked.

A report comes from another node, so nothing in it is believed that a hostile or broken
agent could get wrong: the verdict is recomputed from the findings (a report's own
``verdict`` is read for its type only); the node name must be a host name (``hostname``);
every field read is type- and range-checked against what a node can physically hold
(``MAX_GPUS``, ``MAX_HCAS``, ``MAX_FINDINGS``, a plausible duration, a timestamp); every
number it keeps must be finite, since NaN and Infinity are not JSON and would make our own output
invalid. Anything else malformed becomes a one-line reason (cluster.reachability).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ...agent.base.hostname import is_node_name
from ...agent.model.host import IMEX_DOMAIN_STATES, IMEX_HOST, IMEX_STATUS
from ...checks.core.finding import Action, Finding, Status, worst
from .node import NODE_SCHEMA

REQUIRED = ("schema", "node", "profile", "version", "started_at", "duration_s", "verdict",
            "inventory", "findings")
NODE_SCHEMA_PREFIX = "clusterdiag/node-report/"
STATUSES = tuple(s.value for s in Status)
NOT_READY = (Status.FAIL, Status.ERROR)
QUIET = (Status.PASS, Status.SKIP)  # counted, never kept
ACTIONS = frozenset(a.value for a in Action)

# What one node can hold. The largest GPU servers carry 16 GPUs (20 on some PCIe boxes);
# a host with SR-IOV virtual functions lists hundreds of mlx5 devices; a node's report
# holds one finding per check and component (~300 on a DGX H100, a few thousand on the
# largest). Four times that is still a node; 100,016 GPUs is not.
MAX_GPUS = 64
MAX_HCAS = 1024
MAX_FINDINGS = 50_000
MAX_DURATION_S = 86_400.0  # a node run lasts seconds; a day is no run of ours
# Lengths of the strings a finding carries: one readable line, not a payload.
MAX_LENGTH = {"check": 100, "component": 200, "message": 1_000}
MAX_NAME = 200  # profile name, version
# observed/expected are JSON values; deeper or bigger than this is not a measurement.
MAX_VALUE_DEPTH = 16
MAX_VALUE_ITEMS = 10_000
# An IMEX domain lists the trays of one NVLink domain (18 in an NVL72); the collector keeps
# at most this many (agent/collectors/imex.py MAX_NODES), and so does the cluster view.
MAX_IMEX_PEERS = 1024
MAX_IMEX_INDEX = 9999  # four digits, as the collector reads an index


class BadReport(ValueError):
    """Why an answer or a file is not a node report we read; stable text (no node names),
    so that the same trouble on many nodes groups into one line."""


@dataclass(frozen=True)
class ImexPeerView:
    """One peer as a tray's IMEX daemon lists it."""

    index: int
    host: str
    host_name: str | None
    status: str


@dataclass
class ImexView:
    """A tray's view of its IMEX domain: the domain's state (None where it was not read),
    its peers, and the nodes-file entries that are the tray itself."""

    status: str | None
    peers: list[ImexPeerView]
    own: list[str]


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
    imex: ImexView | None = None


@dataclass
class NodeSummary:
    node: str
    profile: str
    version: str
    verdict: Status  # the worst of the node's findings, before cluster checks
    gpus: int
    counts: dict[str, int]
    problems: list[Finding]  # warn, fail and error findings
    facts: NodeFacts = field(default_factory=NodeFacts)
    answered: bool = True  # False: a placeholder for a node that gave no usable report
    rack: str | None = None  # set by cluster.nvl_domain for NVL72 trays
    started_at: dt.datetime | None = None  # when the node's run began: merge keeps the newest

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
# The fields the cross-node checks read, and the type each must have there: they group
# and count these values (and look a rail's port up by hca/port), so a list where a string
# belongs, or a missing key, would crash the whole report.
_RECORDS: dict[str, dict[str, type | tuple[type, ...]]] = {
    "fabric": {"gpu": int, "state": _SCALARS, "cluster_uuid": _SCALARS,
               "clique_id": (int, type(None))},
    "rails": {"gpu": int, "hca": str, "port": int, "subnet": _SCALARS,
              "rate_gbps": _SCALARS}}


def _records(inventory: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """The records, each checked field by field in a plain loop: nested generators cost a
    frame per record, and every node of a 10,000-node merge has 16 of them."""
    items = inventory.get(key) or []
    fields = tuple(_RECORDS[key].items())
    if not isinstance(items, list):
        raise BadReport(f"node report has a malformed inventory.{key}")
    for item in items:
        if not isinstance(item, dict):
            raise BadReport(f"node report has a malformed inventory.{key}")
        for name, kind in fields:
            if not isinstance(item.get(name), kind):
                raise BadReport(f"node report has a malformed inventory.{key}")
    return items


def _telemetry(inventory: dict[str, Any]) -> dict[str, float]:
    values = inventory.get("telemetry") or {}
    try:
        if isinstance(values, dict) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                            and math.isfinite(v) for v in values.values()):
            return {str(k): float(v) for k, v in values.items()}
    except OverflowError:  # an integer beyond any float
        pass
    raise BadReport("node report has a malformed inventory.telemetry")


def _host(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(IMEX_HOST, value) is not None


def _peer(item: Any) -> ImexPeerView:
    if not (isinstance(item, dict) and isinstance(item.get("index"), int)
            and not isinstance(item["index"], bool) and 0 <= item["index"] <= MAX_IMEX_INDEX
            and _host(item.get("host"))
            and (item.get("host_name") is None or _host(item.get("host_name")))
            and isinstance(item.get("status"), str)
            and re.fullmatch(IMEX_STATUS, item["status"]) is not None):
        raise BadReport("node report has a malformed inventory.imex peer")
    return ImexPeerView(item["index"], item["host"], item.get("host_name"), item["status"])


def _imex(inventory: dict[str, Any]) -> ImexView | None:
    """A tray's IMEX view: another node's word, so every peer is bounded and validated
    as the collector validated it (an address, a status token)."""
    value = inventory.get("imex")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadReport("node report has a malformed inventory.imex")
    status, peers, own = value.get("status"), value.get("peers"), value.get("own")
    if status is not None and status not in IMEX_DOMAIN_STATES:
        raise BadReport("node report's inventory.imex status is none of "
                        + ", ".join(IMEX_DOMAIN_STATES))
    if not isinstance(peers, list) or not isinstance(own, list):
        raise BadReport("node report has a malformed inventory.imex")
    if len(peers) > MAX_IMEX_PEERS or len(own) > MAX_IMEX_PEERS:
        raise BadReport(f"node report lists more than {MAX_IMEX_PEERS} IMEX peers")
    if not all(_host(entry) for entry in own):
        raise BadReport("node report has a malformed inventory.imex own entry")
    return ImexView(status, [_peer(p) for p in peers], list(own))


def _json_value(value: Any, where: str) -> None:
    """A finding's observed/expected: plain JSON, finite, bounded in depth and size."""
    todo, seen = [(value, 0)], 0
    while todo:
        item, depth = todo.pop()
        seen += 1
        if depth > MAX_VALUE_DEPTH or seen > MAX_VALUE_ITEMS:
            raise BadReport(f"node report has a finding {where} too deep or too large")
        if isinstance(item, float) and not math.isfinite(item):
            raise BadReport("node report has a number that is not finite (NaN or Infinity)")
        if isinstance(item, dict):
            todo.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            todo.extend((v, depth + 1) for v in item)


def _texts(item: Any) -> None:
    """A finding is an object whose check, component and message are bounded strings."""
    if not isinstance(item, dict):
        raise BadReport("node report has a finding that is not an object")
    for key, limit in MAX_LENGTH.items():
        text = item.get(key, "") if key == "check" else item.get(key)
        if not isinstance(text, str):
            raise BadReport(f"node report has a finding whose {key} is not a string")
        if len(text) > limit:
            raise BadReport(f"node report has a finding whose {key} is longer than {limit}")


def _finding(item: Any) -> Finding:
    """A problem, checked in full: it is judged, kept and shown."""
    _texts(item)
    for key in ("observed", "expected"):
        _json_value(item.get(key), key)
    return Finding.from_dict(item)


class _Unusual(Exception):
    """The plain reading of the findings met something it leaves to the careful one."""


def _fold_plain(items: list[Any]) -> tuple[dict[str, int], list[Finding]]:
    """The counts by status and the problems, for findings as our agent writes them (every
    key present, strings where strings belong); anything else raises _Unusual, KeyError or
    TypeError before a wrong count is returned.

    Passes and skips are nine in ten of a report's findings and are dropped once counted,
    never judged or shown: each is checked for the shape a finding promises (an object, a
    known status and action, its texts strings of bounded length) in one tight loop, and
    no Finding is built for it. Its observed and expected values are not walked, since
    nothing reads them. Building and walking every finding costs several times the
    ``json.loads`` of the report, and ``report merge`` and the gather are held to a small
    multiple of that parse (bench/merge_scale.py, bench/gather_scale.py)."""
    counts = dict.fromkeys(STATUSES, 0)
    problems: list[Finding] = []
    actions, limit_check, limit_component, limit_message = (
        ACTIONS, MAX_LENGTH["check"], MAX_LENGTH["component"], MAX_LENGTH["message"])
    for item in items:
        status = item["status"]
        counts[status] += 1  # KeyError unless a status, TypeError unless hashable
        if status != "pass" and status != "skip":
            problems.append(_finding(item))
            continue
        check, component, message = item["check"], item["component"], item["message"]
        if (item["action"] not in actions or type(check) is not str
                or type(component) is not str or type(message) is not str
                or len(check) > limit_check or len(component) > limit_component
                or len(message) > limit_message):
            raise _Unusual
    return counts, problems


def _fold_each(items: list[Any]) -> tuple[dict[str, int], list[Finding]]:
    """The same fold, one finding at a time with the reason for the first bad one; a
    missing check or action takes its default, as ``Finding.from_dict`` gives it."""
    counts = dict.fromkeys(STATUSES, 0)
    problems: list[Finding] = []
    for item in items:
        _texts(item)
        status = Status(item["status"])
        Action(item.get("action", Action.NONE.value))
        counts[status.value] += 1
        if status not in QUIET:
            problems.append(_finding(item))
    return counts, problems


def _fold(items: list[Any]) -> tuple[dict[str, int], list[Finding]]:
    try:
        return _fold_plain(items)
    except (_Unusual, KeyError, TypeError):
        return _fold_each(items)


def _started_at(value: Any) -> dt.datetime:
    try:
        stamp = dt.datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        stamp = None
    if stamp is None or stamp.tzinfo is None:
        raise BadReport("node report's started_at is not an ISO 8601 time with a zone")
    return stamp


def _checked_scalars(report: dict[str, Any]) -> None:
    duration = report["duration_s"]
    if not (isinstance(duration, (int, float)) and not isinstance(duration, bool)
            and 0 <= duration <= MAX_DURATION_S):
        raise BadReport(f"node report's duration_s is not between 0 and {MAX_DURATION_S:g}")
    if not isinstance(report["version"], str) or len(report["version"]) > MAX_NAME:
        raise BadReport(f"node report's version is not a string of at most {MAX_NAME}")
    if not isinstance(report["verdict"], str) or report["verdict"] not in STATUSES:
        raise BadReport("node report's verdict is not a status")
    findings = report["findings"]
    if not isinstance(findings, list) or not 1 <= len(findings) <= MAX_FINDINGS:
        raise BadReport(f"node report does not hold 1 to {MAX_FINDINGS:,} findings")


def _facts(inventory: dict[str, Any]) -> NodeFacts:
    gpus = inventory.get("gpus") or []
    hcas = inventory.get("hcas") or []
    if not isinstance(gpus, list) or not isinstance(hcas, list):
        raise BadReport("node report has a malformed inventory.gpus or inventory.hcas")
    if len(gpus) > MAX_GPUS:
        raise BadReport(f"node report lists more GPUs than a node holds ({MAX_GPUS})")
    if len(hcas) > MAX_HCAS:
        raise BadReport(f"node report lists more HCAs than a node holds ({MAX_HCAS})")
    return NodeFacts(
        driver=inventory.get("driver"), cuda=inventory.get("cuda"), nccl=inventory.get("nccl"),
        kernel=inventory.get("kernel"),
        vbios=_joined([g.get("vbios") for g in gpus if isinstance(g, dict)]),
        hca_firmware=_joined([h.get("firmware") for h in hcas if isinstance(h, dict)]),
        fabric=_records(inventory, "fabric"), rails=_records(inventory, "rails"),
        telemetry=_telemetry(inventory), imex=_imex(inventory),
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
    try:
        _checked_scalars(report)
        node, profile = report["node"], report["profile"]["name"]
        if not isinstance(node, str) or not isinstance(profile, str) or len(profile) > MAX_NAME:
            # str() would turn a null node into a node called "None" in the cluster report
            raise BadReport("node report's node or profile name is not a string")
        if not node:
            raise BadReport("node report names no node")
        if not is_node_name(node):
            raise BadReport("node report's node is not a valid node name")
        started = _started_at(report["started_at"])
        counts, problems = _fold(report["findings"])
        inventory = report["inventory"]
        facts = _facts(inventory)
        gpus = len(inventory.get("gpus") or [])
    except BadReport:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise BadReport(f"malformed node report ({type(exc).__name__})") from None
    return NodeSummary(node=node, profile=profile, version=report["version"],
                       verdict=worst(Status(s) for s, n in counts.items() if n),
                       gpus=gpus, counts=counts, problems=problems,
                       facts=facts, started_at=started)
