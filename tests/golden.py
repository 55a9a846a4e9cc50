"""Golden node and cluster reports: what the command prints today, kept under tests/golden/,
so a change that alters a report shows as a diff in review.

Reports are rendered by the real command (the node table and JSON of ``run --simulate``)
or by the demo's own path (``run_demo`` then the CLI's ``emit``), then the parts that
legitimately differ between runs are masked (MASKED_KEYS, TEXT_MASKS). A feature that
changes output regenerates the files (``python -m dev.regenerate``, which calls
``generated``) and the commit shows the diff; tests/test_golden.py compares.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from clusterdiag.agent.cli.emit import emit
from clusterdiag.agent.cluster.demo import run_demo
from clusterdiag.agent.model.version import VERSION
from tests.conftest import REPO, run_cli

GOLDEN = REPO / "tests/golden"
CONFIG = GOLDEN / "config.yaml"
NODES = {"dgx-h100": "dgx-h100", "gb200-nvl72": "gb200-nvl72",
         "faulty-node": str(GOLDEN / "faulty-node.yaml")}

# JSON keys whose values differ on every run: clocks, how long things took.
MASKED_KEYS = frozenset({"started_at", "generated_at", "taken_at", "duration_s", "seconds"})
# Checks whose observed value is the machine running the test, not the simulated node:
# host.disk takes statvfs of the simulated root, a temporary directory on this machine.
HOST_DEPENDENT = frozenset({"host.disk"})
TEXT_MASKS = (
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"), "<time>"),
    (re.compile(r"· \d+(?:\.\d+)? s ·"), "· <seconds> s ·"),
    (re.compile(r"clusterdiag " + re.escape(VERSION) + r"\b"), "clusterdiag <version>"),
    (re.compile(r"^(\s*\w+\s+(?:" + "|".join(map(re.escape, HOST_DEPENDENT))
                + r")\s.*\(observed=)[^,)]*", re.M), r"\1<this machine>"),
)


def mask_json(value: Any, key: str | None = None) -> Any:
    """``value`` with run-to-run differences replaced by ``<key>`` placeholders."""
    if key in MASKED_KEYS and value is not None:
        return f"<{key}>"
    if key == "version" and value == VERSION:
        return "<version>"  # clusterdiag's own (nodes' and the report's), not a driver's
    if isinstance(value, list):
        return [mask_json(item) for item in value]
    if isinstance(value, dict):
        masked = {k: mask_json(v, k) for k, v in value.items()}
        if masked.get("check") in HOST_DEPENDENT and "observed" in masked:
            masked["observed"] = "<this machine>"
        return masked
    return value


def mask_text(text: str) -> str:
    for pattern, replacement in TEXT_MASKS:
        text = pattern.sub(replacement, text)
    return text


def masked(name: str, text: str) -> str:
    if name.endswith(".json"):
        return json.dumps(mask_json(json.loads(text)), indent=1) + "\n"
    return mask_text(text)


def node_report(name: str, fmt: str) -> tuple[str, str]:
    """The golden file's name and masked text of the simulated node ``name`` in ``fmt``
    (``json`` or ``table``), as ``run --simulate`` prints it."""
    proc = run_cli("run", "--simulate", NODES[name], "--config", str(CONFIG), "--format", fmt)
    want = 1 if name == "faulty-node" else 0
    if proc.returncode != want or proc.stderr:
        raise RuntimeError(f"run --simulate {name} --format {fmt}: exit {proc.returncode} "
                           f"(expected {want}), stderr {proc.stderr[-300:]!r}")
    file = f"node-{name}.{'json' if fmt == 'json' else 'txt'}"
    return file, masked(file, proc.stdout)


def demo_reports() -> dict[str, str]:
    """The demo cluster's report in JSON and Markdown, masked, by golden file name."""
    report = run_demo(None, CONFIG, None)
    found = {}
    with tempfile.TemporaryDirectory() as work:
        for fmt in ("json", "md"):
            out = Path(work) / f"cluster.{fmt}"
            if emit(report, fmt, out, None) != 1:  # the demo plants faults: not ready
                raise RuntimeError("the demo cluster came out ready")
            name = f"cluster-demo.{fmt}"
            found[name] = masked(name, out.read_text(encoding="utf-8"))
    return found


def generated() -> dict[Path, str]:
    """Every golden report and the text it must have."""
    files = dict(node_report(name, fmt) for name in sorted(NODES) for fmt in ("json", "table"))
    files.update(demo_reports())
    return {GOLDEN / name: text for name, text in sorted(files.items())}
