"""The reference pages generated from the code: docs/checks.md, docs/metrics.md and
docs/layers.md, written by ``python -m dev.regenerate`` with the other generated files.

checks.md lists every node check of the registry (id, levels, what it needs, its
parameters with their defaults, types and meaning, its actions and remedy), the cluster
checks and the qualify findings. metrics.md lists every Prometheus family the agent
serves, read from the exposition the agent's own registry renders for a simulated healthy
DGX H100: name, type, help and label names. Both are deterministic (sorted; no times,
hostnames or values), so a test can compare them with the files. layers.md is the layer
map tests/test_layering.py enforces: each folder and the folders it may import.
"""

from __future__ import annotations

import importlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHECKS_PAGE = "docs/checks.md"
METRICS_PAGE = "docs/metrics.md"
LAYERS_PAGE = "docs/layers.md"
REGENERATE = "python -m dev.regenerate"

_CODE = re.compile(r"(`[^`]*`)")


def markdown(text: str) -> str:
    """Docstring text as Markdown: reST's double backquotes become code spans; outside
    code, ``<`` and ``*`` are escaped so that they print as written."""
    parts = _CODE.split(text.replace("``", "`"))
    return "".join(part if part.startswith("`") else
                   part.replace("<", "&lt;").replace("*", r"\*") for part in parts)


def cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", r"\|")


def _plain(doc: str) -> str:
    """A docstring as ``checks explain`` reads it (citations of notes that are not shipped
    dropped), with its code quotes kept."""
    from clusterdiag.agent.cli.checks import plain

    return plain(doc.replace("``", "`"))


def _body(doc: str | None) -> list[str]:
    """The docstring after its first line, as Markdown paragraphs."""
    rest = "\n".join((doc or "").strip().splitlines()[1:])
    text = _plain(rest)
    if not text:
        return []
    return [markdown(text), ""]


def _where(obj: Any) -> str:
    """The file that defines ``obj``, relative to the repository (no line: a page that
    changed with every edit above a check would always be stale)."""
    from clusterdiag.agent.cli.checks import defined_at

    return defined_at(obj).rsplit(":", 1)[0]


def _parameters(spec: Any) -> list[str]:
    from clusterdiag.agent.cli.checks import kind_text
    from clusterdiag.checks.core.params import defaults_of, docs_of

    defaults = defaults_of(spec.params_type)
    if not defaults:
        return []
    docs = docs_of(spec.params_type)
    rows = [f"Parameters (`checks.{spec.id}` in the config, `thresholds.{spec.id}` in a "
            "profile):", "", "| parameter | default | type | meaning |", "|---|---|---|---|"]
    for key, value in defaults.items():
        rows.append(f"| `{key}` | `{cell(json.dumps(value))}` | "
                    f"{cell(kind_text(spec.schema[key]))} | {cell(markdown(_plain(docs[key])))} |")
    return [*rows, ""]


def _node_check(spec: Any) -> list[str]:
    lines = [f"### {spec.id}", "", markdown(spec.summary), "", *_body(spec.func.__doc__)]
    facts = [f"- levels: {', '.join(level.value for level in spec.levels)}",
             f"- needs: {', '.join(spec.needs) or 'nothing'}"]
    if spec.skip_in:
        facts.append(f"- skipped in: {', '.join(sorted(m.value for m in spec.skip_in))}")
    if spec.privileged:
        facts.append("- reads what only root may read: the prolog runs it when the agent "
                     "could not")
    if spec.actions:
        facts.append(f"- actions: {', '.join(a.value for a in spec.actions)}")
    facts.append(f"- remedy: {markdown(' '.join(spec.remedy.split()))}")
    facts.append(f"- defined in: `{_where(spec.func)}`")
    return [*lines, *facts, "", *_parameters(spec)]


def _cluster_checks() -> list[str]:
    from clusterdiag.reports.cluster_checks import CATALOG

    lines = ["## Cluster checks", "",
             "They judge node reports side by side, wherever reports meet (`run --nodes`, "
             "`report merge`, `demo`); their settings are the `cluster:` section of the "
             "config.", ""]
    for check_id, summary in CATALOG.items():
        name = check_id.split(".", 1)[1]
        module = importlib.import_module(f"clusterdiag.reports.cluster_checks.{name}")
        judge = getattr(module, name, module)
        lines += [f"### {check_id}", "", markdown(summary[:1].upper() + summary[1:]) + ".", ""]
        doc = _plain(module.__doc__ or "")
        if doc.startswith(f"{check_id}: "):  # the module's first line names the check
            rest = doc.removeprefix(f"{check_id}: ")
            doc = rest[:1].upper() + rest[1:]
        if doc:
            lines += [markdown(doc), ""]
        lines += [f"- defined in: `{_where(judge)}`", ""]
    return lines


def _qualify_findings() -> list[str]:
    from clusterdiag.agent.cli.checks import active_facts, expected_rows
    from clusterdiag.checks.catalogs.manifest import ACTIVE
    from clusterdiag.checks.profiles.profile import builtin_names
    from clusterdiag.checks.qualify.judge import CATALOG, TEST_NAMES

    lines = ["## Qualify findings", "",
             "`clusterdiag qualify` reports each active test as a finding of its own id "
             "(see [qualify.md](qualify.md)); the action is what a failure asks for.", "",
             "| id | what it measures | action |", "|---|---|---|"]
    for check_id, action in sorted(CATALOG.items()):
        test = check_id.split(".", 1)[1]
        words = TEST_NAMES.get(test, {"logs": "a saved log qualify cannot read",
                                      "inventory": "the node's GPUs could not be listed"}
                               .get(test, ""))
        lines.append(f"| `{check_id}` | {cell(words)} | {action.value} |")
    lines += ["", "## Active tests", "",
              "Each active test as `checks/qualify/active.py` declares it: its tool, the "
              "command line the planner builds, its figure and unit, how it is judged, and "
              "the expected figure and floor of each built-in profile that gives one (in the "
              "test's unit, with its source; a site profile's `qualify.ID` overrides it).", ""]
    for test, declared in ACTIVE.items():
        lines += [f"### qualify.{test}", "", markdown(declared["summary"][:1].upper()
                                                      + declared["summary"][1:]) + ".", ""]
        lines += [f"- {label}: {cell(markdown(text))}" for label, text in active_facts(test)]
        rows = expected_rows(test, builtin_names())
        if rows:
            lines += ["- expected, per profile:",
                      *(f"  - {cell(markdown(row))}" for row in rows)]
        lines.append("")
    return lines


def checks_page() -> str:
    from clusterdiag import checks

    specs = sorted(checks.select(None), key=lambda s: s.id)
    families = Counter(spec.id.split(".", 1)[0] for spec in specs)
    lines = ["# Check catalog", "",
             "Every check clusterdiag runs, generated from the code by "
             f"`{REGENERATE}`: do not edit by hand.", "",
             "Ids are stable: checks are added, never renamed. `clusterdiag checks explain ID` "
             "prints the same for one check. Levels: `quick` runs everywhere, `full` adds the "
             "rate checks (two samples) and the active tests. A parameter is overridden under "
             "`checks.ID` in the config or `thresholds.ID` in a site profile "
             "([config.md](config.md), [profiles.md](profiles.md)).", "",
             "## Node checks", "",
             ", ".join(f"{family} ({n})" for family, n in sorted(families.items())), ""]
    for spec in specs:
        lines += _node_check(spec)
    lines += _cluster_checks()
    lines += _qualify_findings()
    return "\n".join(lines).rstrip("\n") + "\n"


def _exposition() -> str:
    """The agent's /metrics for a simulated healthy DGX H100, after one collection with one
    XID recorded and one drain in its lifecycle, so that every family the agent serves is
    present."""
    import tempfile
    import time

    from prometheus_client import generate_latest

    from clusterdiag.agent.daemon.metric_labels import MetricSettings
    from clusterdiag.agent.daemon.metrics import AgentView, registry_for
    from clusterdiag.agent.health import store
    from clusterdiag.agent.health.lifecycle import Health, Incident
    from clusterdiag.agent.run.collect import SOURCES, collect_snapshot
    from clusterdiag.agent.run.runner import RunOptions, evaluate
    from clusterdiag.agent.settings.config import Config
    from clusterdiag.agent.sim.node import env_for
    from clusterdiag.agent.sim.spec import NodeSpec

    env = env_for(NodeSpec("node", "dgx-h100"))
    snap = collect_snapshot(env, list(SOURCES), time.monotonic() + 30, "quick")
    report = evaluate(snap, Config(), RunOptions(profile="dgx-h100"))
    with tempfile.TemporaryDirectory() as state:
        health = Health()
        health.drain(Incident("nvlink", "nvlink.links_up", "gpu3", "17/18", snap.taken_at))
        store.save(Path(state), health)
        view = AgentView(snapshot=snap, report=report, xid_counts=Counter({("0", "79"): 1}),
                         collections=1, last_success=snap.taken_at,
                         settings=MetricSettings(hostname="node"),
                         health=store.HealthFile(Path(state)))
        return generate_latest(registry_for(lambda: view)).decode()


def metric_families(text: str) -> list[dict[str, Any]]:
    """Each family of an exposition: the series name a query uses, type, help, labels."""
    from prometheus_client.parser import text_string_to_metric_families

    families = []
    for family in text_string_to_metric_families(text):
        names = sorted({s.name for s in family.samples}) or [family.name]
        labels = sorted({label for s in family.samples for label in s.labels})
        families.append({"names": names, "type": family.type, "help": family.documentation,
                         "labels": labels})
    return sorted(families, key=lambda f: f["names"][0])


def metrics_page(text: str | None = None) -> str:
    families = metric_families(_exposition() if text is None else text)
    lines = ["# Metrics", "",
             "Every Prometheus series family the agent serves on `GET /metrics`, generated "
             f"from the code by `{REGENERATE}`: do not edit by hand.", "",
             "Read from what the agent's own registry renders for a simulated healthy DGX H100 "
             "after one collection with one XID recorded. A family appears only when there is "
             "something to report: no GPU series without NVML, no InfiniBand series without "
             "RDMA devices, no `clusterdiag_last_collection_timestamp_seconds` before the "
             "first collection. `Hostname` is on GPU series and `clusterdiag_node_info` "
             "unless `metrics.hostname` is `\"\"`. How the labels join with dcgm-exporter's "
             "and node_exporter's series, the scrape job and the shipped dashboard and "
             "rules: [agent.md](agent.md#metrics).", "",
             "| series | type | labels | help |", "|---|---|---|---|"]
    for family in families:
        names = "<br>".join(f"`{name}`" for name in family["names"])
        labels = ", ".join(f"`{label}`" for label in family["labels"]) or "none"
        lines.append(f"| {names} | {family['type']} | {labels} | {cell(family['help'])} |")
    return "\n".join(lines) + "\n"


def layers_page() -> str:
    """The layer map as a table, from the one the layering test enforces."""
    from tests.test_layering import LAYERS

    def folder(dotted: str) -> str:
        return "`" + "/".join(dotted.split(".")[1:]) + "`"

    lines = ["# The layer map", "",
             "Each folder of the code is a layer: it may import only the folders named beside it",
             "(its own modules aside). `tests/test_layering.py` holds this map and fails on any",
             "import it does not allow, function-level and type-checking imports included.",
             "Generated from that test by `python -m dev.regenerate`; design.md §2 says why the",
             "layers are what they are.", "",
             "| folder | may import |", "|---|---|"]
    for name, allowed in LAYERS.items():
        lines.append(f"| {folder(name)} | {', '.join(map(folder, allowed)) or 'nothing of ours'} |")
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Each generated page by its path in the repository, as the code says it should be."""
    return {CHECKS_PAGE: checks_page(), METRICS_PAGE: metrics_page(), LAYERS_PAGE: layers_page()}


def generated() -> dict[Path, str]:
    """Each generated page and the text it must have (``python -m dev.regenerate``)."""
    return {REPO / path: text for path, text in pages().items()}
