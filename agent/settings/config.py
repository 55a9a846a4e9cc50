"""Configuration: one YAML file, validated when loaded, merged over defaults and profile.

Precedence, lowest first: built-in check defaults < platform profile thresholds < config
file < command-line flags. Every error names the file, the key and what was expected, so
a bad config push fails loudly in one line instead of draining a cluster.

The file is hostile until checked, and checking it must not cost more than it is worth:
it is read only if it is a regular file (a FIFO would block, ``/dev/zero`` never end) of
at most ``MAX_BYTES``; YAML aliases may make a small file a huge tree (an alias bomb), so
the parsed tree is walked once, counting every value each time an alias repeats it, and
refused past ``MAX_VALUES`` values or ``MAX_DEPTH`` levels before anything formats it;
every number must be finite; error messages show a value only in a bounded form
(``brief``). Counts have ranges (``retries`` 0-10, ``concurrency`` 1-4096...), and
``agent_url`` must be a template whose only field is ``{node}``.

Budgets and intervals are finite and at least a fixed floor, so that our own settings
never look like broken hardware (a budget of 0.5 s made every GPU a ``gpu.responsive``
timeout with action reboot, and the prolog drained the node):

- ``MIN_BUDGET_S`` (2 s): the least a collection is given. It is what the default prolog
  leaves for collecting (8 s less two scontrol calls of 3 s); a healthy node collects in
  well under it (README: 0.2-0.3 s), NVML's own source deadline is 6 s.
- ``SLURM_MIN_BUDGET_S`` (8 s) for ``prolog``/``epilog``/``healthcheck``: MIN_BUDGET_S
  plus the two scontrol calls kept in reserve for a drain (slurm/entry.py).
- ``MIN_FULL_INTERVAL_S`` (1 s) between the two samples of ``--level full``: over less,
  a handful of events reads as a storm.
- ``MIN_INTERVAL_S`` (0.1 s) for the agent: collections never overlap, so a short
  interval only means back to back; the floor keeps the loop from spinning. An interval
  shorter than the budget is valid.
- Every time is at most ``MAX_SECONDS`` (a day); ``refresh_min_interval_s`` and
  ``epilog.grace_s`` may be 0.
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import reprlib

from ...checks.catalogs.manifest import ACTIVE
from ...checks.core.levels import LEVEL_NAMES
from ..base.errors import ConfigError
from ..base.plain import plain_copy
from ..base.safefile import read_regular
from .config_cache import RootStore, digest

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

DEFAULT_PATH = "/etc/clusterdiag/config.yaml"
# A real config is a few kilobytes and a few hundred values.
MAX_BYTES = 1 << 20
MAX_VALUES = 10_000
MAX_DEPTH = 32
MIN_BUDGET_S = 2.0
SLURM_MIN_BUDGET_S = 8.0
MIN_FULL_INTERVAL_S = 1.0
MIN_INTERVAL_S = 0.1
MAX_SECONDS = 86_400.0
_BUDGET = (MIN_BUDGET_S, MAX_SECONDS)
_SLURM_BUDGET = (SLURM_MIN_BUDGET_S, MAX_SECONDS)
_TIMEOUT = (0.1, 3_600.0)
# qualify: our own settings must never read as slow or hung hardware (a fail_pct of 0
# drained six healthy nodes of six: run-to-run noise of 1-2 % was "10 % below peers").
# - Percentages (warn_pct, fail_pct, drift_pct) from 1 to 99: below 1 % the tools' own
#   run-to-run noise (nccl-tests busbw and nvbandwidth vary by 1-2 % from run to run) is
#   a verdict; at 100 % or more no figure could ever be that far below its peers.
#   warn_pct is at most fail_pct.
# - min_peers at least 3: the median of two figures sits midway between them and cannot
#   say which one is off.
# - A deadline (qualify.deadline_s) at least a minute, the inventory's 5 s: a tool killed
#   at its deadline is judged a hang and drains its node, so the deadline must outlast a
#   healthy run (NCCL's start-up alone takes seconds; gpu_burn waits 30 s after its burn).
# - burn_s at least 10 s: gpu_burn prints its rates as it goes, and a shorter burn may
#   print none to judge.
# - budget_s at least a minute, at most a week: a run the budget cuts short is our error,
#   never a node's fault, but a budget shorter than one test leaves nothing to judge.
_PCT = (1.0, 99.0)
QUALIFY_MIN_PEERS = 3
QUALIFY_MIN_DEADLINE_S = 60.0
QUALIFY_MIN_INVENTORY_S = 5.0
QUALIFY_MIN_BURN_S = 10.0
QUALIFY_MIN_BUDGET_S = 60.0
QUALIFY_MAX_BUDGET_S = 7 * MAX_SECONDS
# qualify.tools may name these beside the programs the active tests run: gpu_burn's compare
# kernel and the inventory's ibstat (agent/qualify/inventory.py).
QUALIFY_EXTRA_TOOLS = ("gpu_burn_compare", "ibstat")
# qualify.deadline_s may name this beside the runs: the inventory's commands (nvidia-smi,
# ibstat; agent/qualify/plan.py DEADLINES).
QUALIFY_INVENTORY = "inventory"
QUALIFY_MAX_GPU = 255  # qualify.rails: a GPU index (CUDA ordinal)

# Each leaf is (types, default) or (types, default, (lowest, highest)). A nested dict is
# a section.
_NUM = (int, float)
_OPT_STR = (str, type(None))
SCHEMA: dict[str, Any] = {
    "profile": ((str,), "auto"),  # a profile name, auto, or a site profile file (.yaml)
    "profile_dir": ((str,), "/etc/clusterdiag/profiles"),  # site profiles: every *.yaml
    "level": ((str,), "quick"),
    "budget_s": (_NUM, 10.0, _BUDGET),
    "full_interval_s": (_NUM, 3.0, (MIN_FULL_INTERVAL_S, 3_600.0)),
    "node_name": (_OPT_STR, None),
    "checks": ((dict,), {}),
    "prolog": {
        "drain": ((bool,), True),
        "budget_s": (_NUM, 8.0, _SLURM_BUDGET),
        "fail_closed": ((bool,), False),
        "max_report_age_s": ((int, float, type(None)), None, (1.0, MAX_SECONDS)),
        "scontrol": (_OPT_STR, None),
    },
    "epilog": {
        "grace_s": (_NUM, 15.0, (0.0, 3_600.0)),
        "drain": ((bool,), True),
        "budget_s": (_NUM, 30.0, _SLURM_BUDGET),
        "fail_closed": ((bool,), False),
    },
    "healthcheck": {
        "drain": ((bool,), True),
        "resume": ((bool,), True),
        "budget_s": (_NUM, 40.0, _SLURM_BUDGET),
        "fail_closed": ((bool,), False),
    },
    "agent": {
        "listen": ((str,), "127.0.0.1:9464"),
        "interval_s": (_NUM, 30.0, (MIN_INTERVAL_S, MAX_SECONDS)),
        "state_dir": ((str,), "/var/lib/clusterdiag"),
        "token_file": (_OPT_STR, None),
        "allow_unauthenticated": ((bool,), False),
        "tls_cert": (_OPT_STR, None),
        "tls_key": (_OPT_STR, None),
        "unauthenticated_paths": ((list,), []),  # only /metrics, /healthz (security.py)
        "refresh_min_interval_s": (_NUM, 10.0, (0.0, MAX_SECONDS)),
        # timedatectl and dcb answers and devices' fixed attributes reused this
        # long (agent/daemon/commands.py, agent/collectors/kept.py)
        "keep_s": (_NUM, 120.0, (0.0, 3_600.0)),
    },
    # A node's way back to service (agent/health/policy.py, docs/return-to-service.md):
    # strikes within the window hold a repeat offender for repair (at least 1 drain, a
    # window of a minute to the 30 days the lifecycle keeps incidents); a share of 1.0
    # turns fleet events or the circuit breaker off (no share can be over the whole fleet).
    # A validation that could not run is tried again at each health check, this many
    # times in a row, then falls back to on_validation_error (ON_VALIDATION_ERROR).
    # hold_down_s: a recheck family (its check id) -> its hold-down, in place of the
    # declared 600 s (checks/core/validation.py HOLD_DOWN_S); checked by _validate_health.
    "health": {
        "strikes": ((int,), 3, (1, 64)),
        "strike_window_s": (_NUM, 7 * MAX_SECONDS, (60.0, 30 * MAX_SECONDS)),
        "fleet_event_share": (_NUM, 0.1, (0.0, 1.0)),
        "fleet_event_window_s": (_NUM, 600.0, (1.0, MAX_SECONDS)),
        "breaker_share": (_NUM, 0.2, (0.0, 1.0)),
        "validation_tries": ((int,), 3, (1, 100)),
        "on_validation_error": ((str,), "recheck"),
        "hold_down_s": ((dict,), {}),
        # The fleet's medians (qualify.medians_file) older than this are not judged
        # against: a minute to a year (hardware and drivers change over months).
        "medians_max_age_s": (_NUM, 30 * MAX_SECONDS, (60.0, 365 * MAX_SECONDS)),
    },
    # /metrics labels (agent/daemon/metric_labels.py): matching the site's other exporters.
    "metrics": {
        "hostname": ((str,), "auto"),  # GPU series' Hostname: auto | "" (none) | a name
        "replace_blanks_in_model_name": ((bool,), False),
        "ib_node_exporter_counters": ((bool,), True),
    },
    # clusterdiag qualify (agent/qualify/, checks/qualify/judge.py): the straggler rule, the
    # per-run deadlines (run -> seconds), tool paths (program -> path), rails (HCA -> the
    # GPU whose memory its GPUDirect test uses, or host). Ranges: see QUALIFY_* below;
    # the mappings and the cross-key rules are checked by _validate_qualify.
    "qualify": {
        "warn_pct": (_NUM, 5.0, _PCT),
        "fail_pct": (_NUM, 10.0, _PCT),
        "min_peers": ((int,), 3, (QUALIFY_MIN_PEERS, 100_000)),
        "repeat": ((bool,), True),
        "budget_s": (_NUM, 3600.0, (QUALIFY_MIN_BUDGET_S, QUALIFY_MAX_BUDGET_S)),
        "deadline_s": ((dict,), {}),
        "tools": ((dict,), {}),
        "rails": ((dict,), {}),
        "burn_s": (_NUM, 30.0, (QUALIFY_MIN_BURN_S, MAX_SECONDS)),
        # Launches under way at once: each only waits on its tool (an ssh or srun process).
        "parallel_nodes": ((int,), 256, (1, 100_000)),
        "srun_mpi": ((str,), "auto"),  # srun --mpi= of the jobs between nodes
        "drift_pct": (_NUM, 10.0, _PCT),  # --baseline: a figure this far off warns
        # The fleet's per-profile medians (agent/qualify/medians.py): qualify writes them
        # (as --medians does), validate judges a node against them.
        "medians_file": (_OPT_STR, None),
    },
    # Gathering many nodes and judging them together (reports/fleet/gather.py, cluster_checks/).
    "cluster": {
        "concurrency": ((int,), 256, (1, 4096)),
        "connect_timeout_s": (_NUM, 3.0, _TIMEOUT),
        "read_timeout_s": (_NUM, 15.0, _TIMEOUT),
        "retries": ((int,), 1, (0, 10)),
        "deadline_s": (_NUM, 120.0, (1, 86400)),  # the whole gather; a node: connect + read
        "token_file": (_OPT_STR, None),  # default: agent.token_file
        "agent_url": ((str,), "http://{node}:9464"),
        "remote_command": ((str,), "clusterdiag run --format json"),
        "ssh_worker": ((str,), "ssh"),  # a ClusterShell worker: ssh, exec, rsh
        "expected_trays_per_rack": ((int,), 18, (1, 1024)),
        "racks": ((dict,), {}),  # rack name -> node set of its trays
        # Slurm's topology.yaml or topology.conf when scontrol cannot say (agent/slurm/topology.py)
        "slurm_topology": (_OPT_STR, None),
        "pinned": ((dict,), {}),  # driver, cuda, nccl, vbios, hca_firmware, kernel, clusterdiag
        "outlier_mad_k": (_NUM, 6.0, (0.01, 1_000.0)),
        "outlier_min_nodes": ((int,), 5, (2, 1_000_000)),
        "outlier_min_delta": ((dict,), {}),  # metric -> the smallest excess worth a warning
    },
}

# recheck: the check passing again is enough (the health check's rule before validations);
# hold: the node stays out, held for a person (``clusterdiag validate --release``).
ON_VALIDATION_ERROR = ("recheck", "hold")

_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true/false",
               list: "a list", dict: "a mapping", type(None): "null"}


def _describe(types: tuple[type, ...]) -> str:
    names = [_TYPE_NAMES.get(t, t.__name__) for t in types if not (t is int and float in types)]
    return " or ".join(names)


_BRIEF = reprlib.Repr()
_BRIEF.maxstring = _BRIEF.maxother = 60


def brief(value: Any) -> str:
    """``repr(value)``, cut short: a message must not format a huge value."""
    return _BRIEF.repr(value)


def _walk_bounded(data: Any, where: str) -> None:
    """Refuse a tree too big or deep to be a config (aliases counted each time they
    repeat), or holding a number that is not finite, before anything else reads it."""
    todo: list[tuple[Any, str, int]] = [(data, "", 0)]
    seen = 0
    while todo:
        value, path, depth = todo.pop()
        seen += 1
        key = path.split("[", 1)[0] or "top level"
        if seen > MAX_VALUES:
            raise ConfigError(f"{where}: {key!r} makes more than {MAX_VALUES:,} values (YAML "
                              "aliases count each time they repeat)")
        if depth > MAX_DEPTH:
            raise ConfigError(f"{where}: {key!r} is nested more than {MAX_DEPTH} levels deep")
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{where}: key {path!r} must be a finite number, got {value!r}")
        if isinstance(value, dict):
            todo.extend((v, f"{path}.{k}" if path else str(k), depth + 1)
                        for k, v in value.items())
        elif isinstance(value, list):
            todo.extend((v, f"{path}[{i}]", depth + 1) for i, v in enumerate(value))


def _range_problem(value: Any, bounds: tuple[float, float]) -> str | None:
    low, high = bounds
    return None if low <= value <= high else bounds_text(low, high)


def seconds_problem(value: float, low: float, high: float = MAX_SECONDS) -> str | None:
    """Why a time from a flag is unusable (NaN fails every comparison), or None."""
    problem = _range_problem(value, (low, high))
    return None if problem is None else f"{problem} seconds"


def _template_problem(template: str) -> str | None:
    """Why ``agent_url`` is no template of ``{node}`` alone: ``str.format`` would raise
    on a stray brace, index by position or reach into attributes."""
    import string  # only for a configured agent_url

    try:
        fields = [f for _, f, spec, conv in string.Formatter().parse(template)
                  if f is not None or spec or conv]
    except ValueError as exc:
        return f"is not a template ({exc})"
    if fields != ["node"] * len(fields) or not fields:
        return "must name {node} and no other field"
    return None


def _type_ok(value: Any, types: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def _unknown(where: str, key: str, choices: list[str]) -> ConfigError:
    import difflib  # only for a config error

    close = difflib.get_close_matches(key, choices, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(f"{where}: unknown key {key!r}{hint}")


def _defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _defaults(v) if isinstance(v, dict) else plain_copy(v[1])
            for k, v in schema.items()}


def _validate_section(data: Any, schema: Mapping[str, Any], where: str, prefix: str) -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: {prefix or 'top level'} must be a mapping")
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in schema:
            raise _unknown(where, name, [f"{prefix}{k}" for k in schema])
        spec = schema[key]
        if isinstance(spec, dict):
            _validate_section(value, spec, where, f"{name}.")
        elif not _type_ok(value, spec[0]):
            raise ConfigError(f"{where}: key {name!r} must be {_describe(spec[0])}, "
                              f"got {type(value).__name__} {brief(value)}")
        elif len(spec) > 2 and value is not None and (problem := _range_problem(value, spec[2])):
            raise ConfigError(f"{where}: key {name!r} {problem}, got {brief(value)}")


def _validate_hold_down(given: Mapping[str, Any], where: str,
                        catalog: Mapping[str, Any]) -> None:
    """``health.hold_down_s`` names a recheck family by its check id (a check of the
    catalog) and gives it a hold-down of zero to the strike window's most (30 days)."""
    for family, value in given.items():
        name = f"health.hold_down_s.{family}"
        if family not in catalog:
            raise _unknown(where, name, [f"health.hold_down_s.{c}" for c in catalog])
        if problem := _range_problem(value, (0.0, 30 * MAX_SECONDS)) \
                if _type_ok(value, _NUM) else "must be a number of seconds":
            raise ConfigError(f"{where}: key {name!r} {problem}, got {brief(value)}")


_MPI_PLUGIN = "[a-z0-9_]+"  # srun --mpi=list prints pmix, pmi2, pmix_v4, cray_shasta, none
_HCA_NAME = "[A-Za-z0-9_.:-]{1,64}"  # an RDMA device name (mlx5_0, ibp12s0)


def qualify_runs() -> dict[str, str]:
    """Each name ``qualify.deadline_s`` may take (a run of the active tests, and the
    inventory), and each test id whose figure comes from a run of another name (the four
    nvbandwidth copy tests) mapped to that run's name."""
    runs = {QUALIFY_INVENTORY: QUALIFY_INVENTORY}
    for test in ACTIVE.values():
        for invocation in (test["invocation"], test["fallback"]):
            if invocation is not None:
                runs[invocation["run"]] = invocation["run"]
    return {**{t: test["invocation"]["run"] for t, test in ACTIVE.items()}, **runs}


def qualify_tools() -> tuple[str, ...]:
    """The names ``qualify.tools`` may set: every program an active test (or its fallback)
    runs, gpu_burn's compare kernel and the inventory's ibstat."""
    programs = {inv["program"] for test in ACTIVE.values()
                for inv in (test["invocation"], test["fallback"]) if inv is not None}
    return (*sorted(programs), *QUALIFY_EXTRA_TOOLS)


def _deadline_problem(run: str, value: Any) -> str | None:
    if not _type_ok(value, _NUM):
        return f"must be a number of seconds, got {type(value).__name__} {brief(value)}"
    low = QUALIFY_MIN_INVENTORY_S if run == QUALIFY_INVENTORY else QUALIFY_MIN_DEADLINE_S
    problem = seconds_problem(value, low)
    return None if problem is None else f"{problem}, got {brief(value)}"


def _tool_problem(name: str, value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return f"must be a path or a program name, got {type(value).__name__} {brief(value)}"
    if "\0" in value or "\n" in value or len(value) > 4096:
        return f"is no path (a NUL, a newline, or over 4096 characters): {brief(value)}"
    if name == "gpu_burn_compare" and not value.startswith("/"):
        return f"must be an absolute path (gpu_burn reads it from its own directory), got " \
               f"{brief(value)}"
    if "/" in value and not value.startswith("/"):
        return (f"must be an absolute path or a program name on PATH (a relative path "
                f"depends on each node's working directory), got {brief(value)}")
    return None


def _rail_problem(value: Any) -> str | None:
    if value == "host":
        return None
    if not isinstance(value, int) or isinstance(value, bool) \
            or not 0 <= value <= QUALIFY_MAX_GPU:
        return f"must be a GPU index from 0 to {QUALIFY_MAX_GPU} or \"host\", got {brief(value)}"
    return None


def _validate_qualify(given: Mapping[str, Any], merged: Mapping[str, Any], where: str) -> None:
    """What a per-key range cannot say of the ``qualify`` section: the names its mappings
    may take (each with a did-you-mean), their values, ``srun_mpi``'s form, and that
    ``warn_pct`` is at most ``fail_pct``. Types and ranges were checked already."""
    runs = qualify_runs()
    for run, value in (given.get("deadline_s") or {}).items():
        name = f"qualify.deadline_s.{run}"
        if run not in runs:
            raise _unknown(where, name, [f"qualify.deadline_s.{r}" for r, to in runs.items()
                                         if r == to])
        if runs[run] != run:
            raise ConfigError(f"{where}: key {name!r}: {run} runs in the {runs[run]} run: set "
                              f"'qualify.deadline_s.{runs[run]}'")
        if problem := _deadline_problem(run, value):
            raise ConfigError(f"{where}: key {name!r} {problem}")
    tools = qualify_tools()
    for tool, value in (given.get("tools") or {}).items():
        name = f"qualify.tools.{tool}"
        if tool not in tools:
            raise _unknown(where, name, [f"qualify.tools.{t}" for t in tools])
        if problem := _tool_problem(tool, value):
            raise ConfigError(f"{where}: key {name!r} {problem}")
    for hca, value in (given.get("rails") or {}).items():
        name = f"qualify.rails.{hca}"
        if not isinstance(hca, str) or not re.fullmatch(_HCA_NAME, hca):
            raise ConfigError(f"{where}: key {name!r}: an RDMA device name is 1-64 letters, "
                              f"digits, '_', '.', ':' or '-'")
        if problem := _rail_problem(value):
            raise ConfigError(f"{where}: key {name!r} {problem}")
    mpi = given.get("srun_mpi")
    if mpi is not None and mpi != "auto" and not re.fullmatch(_MPI_PLUGIN, mpi):
        raise ConfigError(f"{where}: key 'qualify.srun_mpi' must be auto (what srun --mpi=list "
                          f"offers) or a plugin name such as pmix or pmi2, got {brief(mpi)}")
    warn, fail = merged["warn_pct"], merged["fail_pct"]
    if warn > fail:
        key, other = ("fail_pct", "warn_pct") if "warn_pct" not in given else \
            ("warn_pct", "fail_pct")
        relation = "at least" if key == "fail_pct" else "at most"
        raise ConfigError(f"{where}: key 'qualify.{key}' ({merged[key]:g}) must be {relation} "
                          f"'qualify.{other}' ({merged[other]:g})")


# How a parameter's schema (checks/core/params.py) names a value, one and many.
_KIND_NAMES = {"bool": ("true/false", "true/false values"), "int": ("an integer", "integers"),
               "number": ("a number", "numbers"), "str": ("a string", "strings"),
               "null": ("null", "nulls"), "any": ("anything", "values")}


def describe_kinds(kinds: Any, plural: bool = False) -> str:
    """A parameter's type in words: ``an integer or null``, ``a list of strings``."""
    names: list[str] = []
    for kind in kinds:
        if isinstance(kind, dict) and "list" in kind:
            names.append(f"{'lists' if plural else 'a list'} of "
                         f"{describe_kinds(kind['list'], True)}")
        elif isinstance(kind, dict):
            key = "codes" if kind["key"] == "int" else "names"
            names.append(f"{'mappings' if plural else 'a mapping'} of {key} to "
                         f"{describe_kinds(kind['map'], True)}")
        else:
            names.append(_KIND_NAMES[kind][plural])
    return " or ".join(names)


def _fits(value: Any, kind: str | dict[str, Any]) -> bool:
    if isinstance(kind, dict) and "list" in kind:
        return isinstance(value, (list, tuple)) and all(
            any(_fits(v, k) for k in kind["list"]) for v in value)
    if isinstance(kind, dict):
        return isinstance(value, dict) and all(
            _key_fits(k, kind["key"]) and any(_fits(v, m) for m in kind["map"])
            for k, v in value.items())
    if kind == "any":
        return True
    if kind == "null":
        return value is None
    if isinstance(value, bool):
        return bool(kind == "bool")
    if kind == "int":
        return isinstance(value, int)
    if kind == "number":
        return isinstance(value, (int, float))
    return kind == "str" and isinstance(value, str)


def _key_fits(key: Any, kind: str) -> bool:
    """A mapping key: YAML reads ``4:`` as an int and ``"4":`` as a string, so a name may
    be a number and a code may be a string of digits."""
    if isinstance(key, bool):
        return False
    if kind == "int":
        return isinstance(key, int) or (isinstance(key, str) and key.strip().isdigit())
    return isinstance(key, (str, int))


def _numbers(value: Any) -> list[float]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [value]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _numbers(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _numbers(v)]
    return []


def _lists(value: Any) -> list[list[Any] | tuple[Any, ...]]:
    if isinstance(value, (list, tuple)):
        return [value, *(inner for v in value for inner in _lists(v))]
    if isinstance(value, dict):
        return [inner for v in value.values() for inner in _lists(v)]
    return []


def param_problem(value: Any, schema: Mapping[str, Any]) -> str | None:
    """Why ``value`` is no value of a check parameter with this schema, or None: its type
    (null only where the dataclass says ``| None``; each item of a list, each value of a
    mapping), its choices, its bounds (every number in it), the length of every list."""
    kinds = schema["type"]
    if not any(_fits(value, kind) for kind in kinds):
        return f"must be {describe_kinds(kinds)}, got {type(value).__name__} {brief(value)}"
    choices = schema.get("choices")
    if choices and value is not None and value not in choices:
        return f"must be {' or '.join(map(repr, choices))}, got {brief(value)}"
    length = schema.get("len")
    if length is not None and any(len(items) != length for items in _lists(value)):
        return f"must have {length} items in each list, got {brief(value)}"
    low, high = schema.get("ge"), schema.get("le")
    for number in _numbers(value):
        if (low is not None and number < low) or (high is not None and number > high):
            return f"{bounds_text(low, high)}, got {brief(value)}"
    return None


def bounds_text(low: float | None, high: float | None) -> str:
    if low is not None and high is not None:
        return f"must be from {low:g} to {high:g}"
    return f"must be at least {low:g}" if low is not None else f"must be at most {high:g}"


def validate_check_params(checks: Any, where: str,
                          catalog: Mapping[str, Mapping[str, Mapping[str, Any]]],
                          section: str = "checks") -> None:
    """``checks:`` maps a catalog id to ``enabled`` plus that check's own parameters,
    each validated against its schema (``catalog``: check id -> parameter -> schema). A
    site profile's ``thresholds:`` (``section``) are the same without ``enabled``."""
    if not isinstance(checks, dict):
        raise ConfigError(f"{where}: {section!r} must be a mapping of check id to settings")
    own = ["enabled"] if section == "checks" else []
    for check_id, settings in checks.items():
        if check_id not in catalog:
            raise _unknown(where, f"{section}.{check_id}", [f"{section}.{c}" for c in catalog])
        if settings is None:
            continue
        if not isinstance(settings, dict):
            raise ConfigError(f"{where}: '{section}.{check_id}' must be a mapping")
        params = catalog[check_id]
        for key, value in settings.items():
            name = f"{section}.{check_id}.{key}"
            if key in own:
                if not isinstance(value, bool):
                    raise ConfigError(f"{where}: key {name!r} must be true/false")
                continue
            if key not in params:
                raise _unknown(where, name, [f"{section}.{check_id}.{k}"
                                             for k in [*params, *own]])
            if problem := param_problem(value, params[key]):
                raise ConfigError(f"{where}: key {name!r} {problem}")


class Config:
    """The merged settings; ``path`` is the file they came from, if any. A plain class, not
    a dataclass: the prolog loads it on every node for every job."""
    __slots__ = ("data", "path")

    def __init__(self, data: dict[str, Any] | None = None, path: str | None = None) -> None:
        self.data: dict[str, Any] = _defaults(SCHEMA) if data is None else data
        self.path = path

    def __repr__(self) -> str:
        return f"Config(path={self.path!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Config):
            return NotImplemented
        return (self.data, self.path) == (other.data, other.path)

    __hash__ = None  # type: ignore[assignment]  # mutable, as the dataclass was

    def section(self, name: str) -> dict[str, Any]:
        section: dict[str, Any] = self.data[name]
        return section

    def enabled(self, check_id: str) -> bool:
        return bool((self.data["checks"].get(check_id) or {}).get("enabled", True))

    def disabled(self) -> dict[str, bool]:
        """``{check id: False}`` for each check the config turns off."""
        return {check_id: False for check_id in self.data["checks"]
                if not self.enabled(check_id)}

    def check_params(self, check_id: str, defaults: Mapping[str, Any],
                     profile_thresholds: Mapping[str, Any] | None = None) -> dict[str, Any]:
        params = dict(defaults)
        params.update(profile_thresholds or {})
        own = self.data["checks"].get(check_id) or {}
        params.update({k: v for k, v in own.items() if k != "enabled"})
        return params


def _read(path: str | Path, where: str) -> str:
    """The file's text: a regular file of at most MAX_BYTES, opened without blocking."""
    try:
        raw = read_regular(path, MAX_BYTES, follow=True)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise ConfigError(f"{where}: larger than {MAX_BYTES >> 20} MiB") from None
        raise ConfigError(f"{where}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: cannot read: {exc}") from None


def _json_document(text: str) -> Any:
    """The document when ``text`` is plain JSON (which is YAML too), else None: parsing it
    with ``json`` spares the prolog PyYAML's import, which costs as much as three
    interpreter starts. ``NaN`` and ``Infinity`` are not JSON (YAML reads
    them as strings), so a text using them is left to YAML."""

    def refuse(name: str) -> Any:
        raise ValueError(name)

    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        return json.loads(stripped, parse_constant=refuse)
    except (ValueError, RecursionError):
        return None


def read_yaml(path: str | Path, where: str) -> Any:
    """The YAML document in ``path``, read bounded and refused when malformed, too big or
    too deep (``where`` starts each message); an empty file is an empty mapping. A file
    of plain JSON is read as JSON, which gives the same document."""
    return _document(_read(path, where), where)


def _document(text: str, where: str, cache: RootStore | None = None,
              key: str | None = None) -> Any:
    """The document ``text`` holds (see ``read_yaml``); with ``cache``, the copy stored
    under ``key`` stands in for parsing YAML (config_cache.py)."""
    data = _json_document(text)
    if data is None and cache is not None and key is not None:
        data = cache.get(key)
    if data is not None:
        _walk_bounded(data, where)
        return data
    import yaml  # PyYAML only for a YAML config (JSON is read without it)

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise ConfigError(f"{where}: malformed YAML{at}: {problem}") from None
    except RecursionError:
        raise ConfigError(f"{where}: malformed YAML: nested too deeply") from None
    if data is None:
        data = {}
    _walk_bounded(data, where)
    return data


def load_config(path: str | Path | None,
                catalog: Mapping[str, Mapping[str, Mapping[str, Any]]],
                cache: RootStore | None = None) -> Config:
    """Load ``path`` (or the default file when it exists); defaults when neither.
    ``catalog`` is every check's parameter schema by id (``session.check_schemas``).
    With ``cache`` (the prolog's), a YAML file is parsed only when it changed since its
    validated copy was stored there; the copy is validated again all the same."""
    if path is None:
        if not os.path.isfile(DEFAULT_PATH):
            return Config()
        path = DEFAULT_PATH
    where = f"config {path}"
    text = _read(path, where)
    sha = digest(text.encode("utf-8")) if cache is not None else None
    data = _document(text, where, cache, sha)
    _validate_section(data, SCHEMA, where, "")
    url = data.get("cluster", {}).get("agent_url")
    problem = None if url is None else _template_problem(url)  # the default is a template
    if problem:
        raise ConfigError(f"{where}: key 'cluster.agent_url' {problem}")
    validate_check_params(data.get("checks", {}), where, catalog)
    merged = _defaults(SCHEMA)
    for key, value in data.items():
        if isinstance(merged.get(key), dict) and key != "checks":
            merged[key].update(value)
        else:
            merged[key] = value
    if "qualify" in data:
        _validate_qualify(data["qualify"], merged["qualify"], where)
    if merged["level"] not in LEVEL_NAMES:
        raise ConfigError(f"{where}: key 'level' must be {' or '.join(LEVEL_NAMES)}, "
                          f"got {merged['level']!r}")
    fallback = merged["health"]["on_validation_error"]
    if fallback not in ON_VALIDATION_ERROR:
        raise ConfigError(f"{where}: key 'health.on_validation_error' must be "
                          f"{' or '.join(ON_VALIDATION_ERROR)}, got {brief(fallback)}")
    _validate_hold_down(merged["health"]["hold_down_s"], where, catalog)
    if cache is not None and sha is not None and cache.why is not None:
        cache.put(sha, data)  # validated; a JSON file leaves why None and is not copied
    return Config(merged, str(path))
