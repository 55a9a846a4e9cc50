"""The node report as a terminal table a person reads at a glance: the verdict, then every
problem (fail, error, warn) one per line, then the passes folded per check (``PASS
gpu.ecc_mode 8/8 GPUs``) packed into columns, then the skips one line per reason. A
healthy DGX H100 fits in a screen; ``--all`` lists every finding instead.

Coloured only when writing to a terminal; piped output is plain text that greps well.
Text from the report goes through ``shown``: a saved report is input, not markup.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections import defaultdict

from ...agent.base.inert import shown
from ...checks.core.finding import Finding, Status
from ..model.node import NodeReport

_COLOURS = {Status.FAIL: "31;1", Status.ERROR: "35;1", Status.WARN: "33;1", Status.PASS: "32",
            Status.SKIP: "2"}
_VERDICT = {Status.FAIL: "NOT READY", Status.ERROR: "NOT READY (could not check everything)",
            Status.WARN: "READY (with warnings)", Status.PASS: "READY", Status.SKIP: "READY"}
PROBLEMS = (Status.FAIL, Status.ERROR, Status.WARN)
_ORDER = (Status.FAIL, Status.ERROR, Status.WARN, Status.PASS, Status.SKIP)
# What a check's components are, for "8/8 GPUs"; the first pattern all of them match.
_NOUNS = ((re.compile(r"gpu\d+"), "GPUs"), (re.compile(r"gpu\d+\.link\d+"), "links"),
          (re.compile(r"nvswitch\d+"), "NVSwitches"), (re.compile(r"[\w.-]+/\d+"), "ports"),
          (re.compile(r"mlx\d+_\d+|[a-z]+\d*_\d+"), "HCAs"))
_MAX_SKIP_IDS = 4
_INDENT = " " * 8  # a wrapped row's continuation, under the check id


def _paint(text: str, status: Status, colour: bool) -> str:
    return f"\x1b[{_COLOURS[status]}m{text}\x1b[0m" if colour else text


def evidence(value: object) -> str:
    """An observed or expected value as a person reads it: a mapping as ``key=value``
    pairs (a value holding a space quoted, a list joined by commas), never a Python
    repr; every piece shown inert."""
    if isinstance(value, dict):
        return " ".join(f"{shown(k)}={_pair_value(v)}" for k, v in value.items())
    return shown(value)


def _pair_value(value: object) -> str:
    if isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    else:
        text = str(value)
    return shown(json.dumps(text) if any(c.isspace() for c in text) or not text else text)


def _row(f: Finding, colour: bool, width: int) -> list[str]:
    """One finding; a problem's row wraps between words at ``width`` (a single token
    longer than a line is broken), its continuation lines indented under the status."""
    detail = []
    for name, value in (("observed", f.observed), ("expected", f.expected)):
        if value is not None:
            detail.append(f"{name}{' ' if isinstance(value, dict) else '='}{evidence(value)}")
    if f.status in PROBLEMS and f.action.value != "none":
        detail.append(f"action={f.action.value}")
    tail = f"  ({', '.join(detail)})" if detail else ""
    status = f"{f.status.value.upper():5}"
    text = f"  {status} {shown(f.check):24} {shown(f.component):14} {shown(f.message)}{tail}"
    lines = [text]
    if f.status in PROBLEMS:
        lines = textwrap.wrap(text, max(40, width), subsequent_indent=_INDENT,
                              break_on_hyphens=False, drop_whitespace=True) or [text]
    first = lines[0]
    painted = "  " + _paint(status, f.status, colour) + first[2 + len(status):]
    return [painted, *lines[1:]]


def _noun(components: list[str]) -> str:
    if len(set(components)) != len(components):
        return ""  # several findings per component (core and memory temperature ...)
    for pattern, noun in _NOUNS:
        if all(pattern.fullmatch(c) for c in components):
            return f" {noun}"
    return ""


def folded_passes(findings: list[Finding]) -> list[str]:
    """One entry per check with a pass: ``gpu.ecc_mode 8/8 GPUs``, or the id alone for a
    check that looked at the node as a whole."""
    by_check: dict[str, list[Finding]] = defaultdict(list)
    for f in findings:
        by_check[f.check].append(f)
    entries = []
    for check in sorted(by_check):
        group = by_check[check]
        passed = [f for f in group if f.status is Status.PASS]
        if not passed:
            continue
        if len(group) == 1 and group[0].component in ("", "node"):
            entries.append(shown(check))
            continue
        noun = _noun([f.component for f in group])
        entries.append(f"{shown(check)} {len(passed)}/{len(group)}{noun}")
    return entries


def _columns(entries: list[str], label: str, width: int) -> list[str]:
    """Entries laid out after ``label`` (a status word, maybe painted) in as many equal
    columns as fit in ``width``, down each column first as ``ls`` does; each entry whole."""
    if not entries:
        return []
    cell = max(len(e) for e in entries) + 3
    per_line = max(1, (width - len("  PASS  ")) // cell)
    rows = -(-len(entries) // per_line)
    return [f"  {label}  " + "".join(e.ljust(cell) for e in entries[r::rows]).rstrip()
            for r in range(rows)]


def folded_skips(findings: list[Finding]) -> list[str]:
    """One entry per reason: ``judges counters over time ...: ib.error_rate, ...``."""
    by_reason: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for f in findings:
        if f.status is Status.SKIP:
            by_reason[f.message][f.check] += 1
    lines = []
    for reason in sorted(by_reason, key=lambda r: (-sum(by_reason[r].values()), r)):
        checks = by_reason[reason]
        ids = [c if n == 1 else f"{c} ({n}x)" for c, n in sorted(checks.items())]
        more = len(ids) - _MAX_SKIP_IDS
        listed = ", ".join(shown(i) for i in ids[:_MAX_SKIP_IDS])
        lines.append(f"{shown(reason)}: {listed}" + (f" (+{more} more)" if more > 0 else ""))
    return lines


def render_table(report: NodeReport, colour: bool = False, width: int = 80,
                 all_findings: bool = False) -> str:
    counts = {s: 0 for s in Status}
    for f in report.findings:
        counts[f.status] += 1
    verdict = report.verdict
    profile = report.profile
    lines = [
        f"{shown(report.node)}: " + _paint(_VERDICT[verdict], verdict, colour),
        f"  profile {shown(profile['name'])}"
        f"{_detected(profile) if profile.get('auto_detected') else ''}"
        f" · level {report.level} · {report.duration_s:.2f} s"
        f"{' · simulated' if report.simulated else ''}",
        "  " + "  ".join(f"{s.value} {counts[s]}" for s in _ORDER),
        "",
    ]
    ordered = sorted(report.findings, key=lambda f: _ORDER.index(f.status))
    if all_findings:
        lines += [line for f in ordered for line in _row(f, colour, width)]
        return "\n".join(lines) + "\n"
    lines += [line for f in ordered if f.status in PROBLEMS for line in _row(f, colour, width)]
    lines += _columns(folded_passes(report.findings), _paint("PASS", Status.PASS, colour),
                      width)
    label = "  " + _paint("SKIP", Status.SKIP, colour) + "  "
    for line in folded_skips(report.findings):
        wrapped = textwrap.wrap(line, max(40, width - 8), break_long_words=False,
                                break_on_hyphens=False)
        lines += [label + wrapped[0], *("        " + more for more in wrapped[1:])]
    if counts[Status.PASS] or counts[Status.SKIP]:
        lines.append("  (--all lists every finding)")
    return "\n".join(lines) + "\n"


_MAX_PASSED_OVER = 3


def _detected(profile: dict[str, object]) -> str:
    """`` (auto-detected)``, naming the profiles detection passed over where several matched
    (``over dgx-h100``): a site profile beside its base judges the node, and says so. A saved
    report is input: only strings, and a few of them."""
    matched = profile.get("matched")
    others = ([shown(n) for n in matched[1:] if isinstance(n, str)]
              if isinstance(matched, list) else [])
    if not others:
        return " (auto-detected)"
    more = len(others) - _MAX_PASSED_OVER
    listed = ", ".join(others[:_MAX_PASSED_OVER]) + (f" (+{more} more)" if more > 0 else "")
    return f" (auto-detected over {listed})"
