"""Simulation specs: nodes by node set with a profile each, plus faults (docs/design.md §7).

Anything the spec names that the node does not have — an unknown key or fault kind, a
GPU, link or HCA out of range — is an error (exit 2, one line), never silently ignored.
So is a number that is not finite (``.nan``, ``.inf``) anywhere in a node entry or a
fault, and more than MAX_NODES nodes in all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ClusterShell.NodeSet import NodeSetParseError

from ...checks.profiles.profile import UnknownProfileError, load_profile
from ..base.errors import UsageError
from ..model.nodeset import MAX_NODES, expand, short
from .faults.catalog import FAULTS
from .faults.ib import hca_problem
from .faults.qualify import delay_problem, factor_problem
from .schedule import WINDOW_KEYS, window_problem
from .state.layout import HCA_LAYOUTS, LAYOUTS, OEM_HCA_LAYOUTS

_NODE_KEYS = {"names", "profile", "rack", "clique", "fabric", "layout"}
FABRICS = ("infiniband", "roce")
_FAULT_COMMON = {"node", "kind"}
# Fault options that are times or counts: numbers from 0 up.
_NUMERIC = ("code", "age_s", "at_s", "port", "gpu", "link", "job", "pid")


@dataclass
class NodeSpec:
    name: str
    profile: str
    rack: str | None = None
    clique: int = 0
    fabric: str = "infiniband"  # roce: the compute rails are RoCE (state/ib.py roce_fabric)
    # oem: an OEM server's DMI name and NIC layout (state/layout.py OEM_HCA_LAYOUTS)
    layout: str = "reference"
    faults: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ClusterSpec:
    nodes: dict[str, NodeSpec]
    source: str


def _bad(where: str, message: str) -> UsageError:
    return UsageError(f"simulation spec {where}: {message}")


def load_spec(arg: str) -> ClusterSpec:
    """A profile name (one healthy node) or a YAML spec file."""
    if arg in LAYOUTS:
        name = f"{arg}-sim"
        return ClusterSpec({name: NodeSpec(name, arg)}, arg)
    path = Path(arg)
    if not path.is_file():
        known = ", ".join(sorted(LAYOUTS))
        raise UsageError(f"--simulate {arg}: neither a profile ({known}) nor a spec file")
    try:
        data = yaml.safe_load(path.read_bytes())
    except OSError as exc:
        raise _bad(arg, exc.strerror or str(exc)) from None
    except yaml.YAMLError as exc:
        # A reader error (bad encoding, control characters) has no ``problem``, and the
        # full text spans lines: the first line is the one that says what is wrong.
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise _bad(arg, f"malformed YAML: {problem}") from None
    except RecursionError:
        raise _bad(arg, "malformed YAML: nested too deeply") from None
    return parse_spec(data, arg)


def parse_spec(data: Any, where: str) -> ClusterSpec:
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise _bad(where, "needs a 'nodes' list")
    unknown = set(data) - {"nodes", "faults"}
    if unknown:
        raise _bad(where, f"unknown key {_first(unknown)!r}")
    nodes: dict[str, NodeSpec] = {}
    for entry in data["nodes"]:
        if not isinstance(entry, dict) or "names" not in entry or "profile" not in entry:
            raise _bad(where, "each node entry needs 'names' and 'profile'")
        extra = set(entry) - _NODE_KEYS
        if extra:
            raise _bad(where, f"unknown node key {_first(extra)!r}")
        _finite(entry, where, "node entry")
        if not isinstance(entry["profile"], str):
            raise _bad(where, f"profile {entry['profile']!r} is not a profile name")
        if entry.get("rack") is not None and not isinstance(entry["rack"], str):
            raise _bad(where, f"rack {entry['rack']!r} is not a name")
        clique = _int(entry.get("clique", 0))
        if clique < 0:
            raise _bad(where, f"clique {entry.get('clique')!r} is not a number from 0 up")
        if entry["profile"] not in LAYOUTS:
            try:
                load_profile(entry["profile"])
            except UnknownProfileError as exc:
                raise _bad(where, str(exc)) from None
            raise _bad(where, f"profile {entry['profile']!r} cannot be simulated")
        fabric = entry.get("fabric", "infiniband")
        if fabric not in FABRICS:
            raise _bad(where, f"fabric {short(str(fabric))!r} is not one of {', '.join(FABRICS)}")
        if fabric == "roce" and not HCA_LAYOUTS.get(entry["profile"]):
            raise _bad(where, f"fabric roce: profile {entry['profile']!r} has no compute NICs")
        layout = entry.get("layout", "reference")
        if layout not in ("reference", "oem") or (
                layout == "oem" and entry["profile"] not in OEM_HCA_LAYOUTS):
            raise _bad(where, f"layout {short(str(layout))!r}: 'reference', or 'oem' on "
                              f"{', '.join(sorted(OEM_HCA_LAYOUTS))}")
        for name in _names(entry["names"], where):
            nodes[name] = NodeSpec(name, entry["profile"], entry.get("rack"), clique, fabric,
                                   layout)
        if len(nodes) > MAX_NODES:
            raise _bad(where, f"more than {MAX_NODES} nodes in all")
    if not nodes:
        raise _bad(where, "names no nodes")
    faults = data.get("faults") or []
    if not isinstance(faults, list):
        raise _bad(where, "'faults' is not a list")
    for fault in faults:
        _add_fault(nodes, fault, where)
    return ClusterSpec(nodes, where)


def _add_fault(nodes: dict[str, NodeSpec], fault: Any, where: str) -> None:
    if not isinstance(fault, dict) or "node" not in fault or "kind" not in fault:
        raise _bad(where, "each fault needs 'node' and 'kind'")
    kind = FAULTS.get(str(fault["kind"]))
    if kind is None:
        raise _bad(where, f"unknown fault kind {fault['kind']!r}")
    allowed = _FAULT_COMMON | set(kind.keys) | set(kind.options) | {"gpu", *WINDOW_KEYS}
    extra = set(fault) - allowed
    if extra:
        raise _bad(where, f"fault {kind.kind}: unknown key {_first(extra)!r}")
    missing = set(kind.keys) - set(fault)
    if missing:
        raise _bad(where, f"fault {kind.kind}: needs key {_first(missing)!r}")
    _finite(fault, where, f"fault {kind.kind}")
    for key in _NUMERIC:
        if key in fault and (isinstance(fault[key], bool)
                             or not isinstance(fault[key], (int, float)) or fault[key] < 0):
            raise _bad(where, f"fault {kind.kind}: {key} must be a number from 0 up, not "
                              f"{short(str(fault[key]))!r}")
    problem = window_problem(fault) or factor_problem(fault) or delay_problem(fault)
    if problem:
        raise _bad(where, f"fault {kind.kind}: {problem}")
    for name in _names(fault["node"], where):
        node = nodes.get(name)
        if node is None:
            raise _bad(where, f"fault {kind.kind}: no node {name!r} in the spec")
        layout = LAYOUTS[node.profile]
        if "gpu" in fault and not 0 <= _int(fault["gpu"]) < len(layout.gpus):
            raise _bad(where, f"fault {kind.kind}: {name} has no GPU {fault['gpu']}")
        if "link" in fault:
            links = load_profile(node.profile).nvlinks_per_gpu
            if not 0 <= _int(fault["link"]) < links:
                raise _bad(where, f"fault {kind.kind}: {name} GPU {fault.get('gpu')} has no "
                                  f"NVLink {fault['link']}")
        if kind.layout == "oem" and node.layout != "oem":
            raise _bad(where, f"fault {kind.kind}: needs a node with layout oem ({name} has "
                              f"{node.layout})")
        if kind.fabric == "roce" and node.fabric != "roce":
            raise _bad(where, f"fault {kind.kind}: needs a node with fabric {kind.fabric} "
                              f"({name} has {node.fabric})")
        if kind.profiles and node.profile not in kind.profiles:
            raise _bad(where, f"fault {kind.kind}: does not apply to {node.profile} ({name})")
        if "block" in fault and (str(fault["block"]) == node.rack or str(fault["block"])
                                 not in {n.rack for n in nodes.values()}):
            raise _bad(where, f"fault {kind.kind}: block {short(str(fault['block']))!r} is "
                              f"not another rack of the spec (each rack is one Slurm block)")
        if "hca" in fault:
            problem = hca_problem(kind.kind, node.profile, str(fault["hca"]),
                                  _int(fault.get("port", 1)))
            if problem:
                raise _bad(where, f"fault {kind.kind}: {name}: {problem}")
        node.faults.append(dict(fault))


def _finite(entry: dict[Any, Any], where: str, what: str) -> None:
    for key, value in entry.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise _bad(where, f"{what}: {key} must be a finite number, not {value!r}")


def _names(value: Any, where: str) -> list[str]:
    try:
        return expand(str(value))
    except NodeSetParseError as exc:
        raise _bad(where, f"bad node set: {exc}") from None


def _first(keys: set[Any]) -> Any:
    """The first of ``keys`` in a stable order; YAML keys need not be strings."""
    return min(keys, key=lambda k: (str(type(k)), str(k)))


def _int(value: Any) -> int:
    """A number (port, GPU, link, clique) as the spec wrote it; -1 (no such thing) when it
    is not a whole number."""
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: .inf
        return -1
