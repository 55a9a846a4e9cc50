"""``qualify --baseline FILE``: the first run saves its figures as the site's baseline; a
later run with the same file reports each figure's drift from it (SuperBench's
``variance = (value - baseline) / baseline``, microsoft/superbenchmark), and a figure slower
than its baseline by more than ``qualify.drift_pct`` is a warning on its node: the part still
meets the profile and its peers, yet is not what it was. A baseline file is read bounded and
validated: a malformed one is a usage error naming the file."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ...checks.core.finding import Action, Finding, Status
from ...checks.qualify.judge import TEST_NAMES, Judged
from ..base.errors import UsageError

SCHEMA = "clusterdiag/qualify-baseline/v1"
MAX_BYTES = 64 << 20


def _key(node: str, test: str, component: str) -> str:
    return f"{node}|{test}|{component}"


def load(path: Path) -> dict[str, float] | None:
    """The baseline's figures by node|test|component, or None when the file is not there."""
    if not path.exists():
        return None
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise ValueError("too large")
        data = json.loads(raw)
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} file")
        return {_key(str(f["node"]), str(f["test"]), str(f["component"])): float(f["value"])
                for f in data["figures"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--baseline {path}: {getattr(exc, 'strerror', None) or exc}") from None


def save(path: Path, judged: Iterable[Judged], generated_at: str) -> None:
    figures = [{"node": j.figure.node, "test": j.figure.test, "component": j.figure.component,
                "value": round(j.figure.value, 3), "unit": j.figure.unit,
                "tool": j.figure.tool} for j in judged]
    text = json.dumps({"schema": SCHEMA, "saved_at": generated_at, "figures": figures},
                      indent=1)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent if str(path.parent) else ".",
                                   prefix=f".{path.name}.")
        with os.fdopen(fd, "w") as handle:
            handle.write(text + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        raise UsageError(f"--baseline {path}: {exc.strerror or exc}") from None


def drift(baseline: dict[str, float], judged: Iterable[Judged]) -> list[dict[str, Any]]:
    """Each figure with a baseline value, and how far it moved (percent, negative = slower)."""
    out = []
    for j in judged:
        f = j.figure
        before = baseline.get(_key(f.node, f.test, f.component))
        if before:
            out.append({"node": f.node, "test": f.test, "component": f.component,
                        "baseline": before, "value": round(f.value, 3), "unit": f.unit,
                        "change_pct": round(100.0 * (f.value - before) / before, 2)})
    return sorted(out, key=lambda d: d["change_pct"])


def drift_findings(moved: Iterable[dict[str, Any]], threshold_pct: float
                   ) -> dict[str, list[Finding]]:
    """A warning per figure more than ``threshold_pct`` slower than its baseline, on its
    node, naming the test and the part (faster is no finding)."""
    out: dict[str, list[Finding]] = {}
    for d in moved:
        if d["change_pct"] >= -threshold_pct:
            continue
        out.setdefault(d["node"], []).append(Finding(
            Status.WARN, d["component"],
            f"{TEST_NAMES.get(d['test'], d['test'])}: {d['value']:g} {d['unit']}, "
            f"{-d['change_pct']:.1f} % below its baseline {d['baseline']:g} (more than "
            f"{threshold_pct:g} %: qualify.drift_pct)",
            {"value": d["value"], "change_pct": d["change_pct"]},
            {"baseline": d["baseline"], "drift_pct": threshold_pct}, Action.INVESTIGATE,
            f"qualify.{d['test']}"))
    return out
