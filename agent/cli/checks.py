"""``clusterdiag checks list|explain ID``: the check catalog: node checks, cluster checks and
the active tests of ``clusterdiag qualify`` (``qualify.<test>``, read from the manifest,
where checks/qualify/active.py's declarations are written as plain data)."""

from __future__ import annotations

import difflib
import importlib
import inspect
import json
import re
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import click

from ... import checks
from ...checks.catalogs.manifest import ACTIVE
from ...checks.core.params import docs_of
from ...checks.core.validation import Validation, for_qualify_test
from ...reports.cluster_checks import CATALOG
from ..base.errors import UsageError
from ..settings.config import bounds_text, describe_kinds


@click.group("checks")
def checks_group() -> None:
    """The check catalog."""


@checks_group.command("list")
def checks_list() -> None:
    """One line per check: id, levels, summary."""
    for spec in checks.select(None):
        click.echo(f"{spec.id:28} {'/'.join(spec.levels):11} {spec.summary}")
    for check_id, summary in CATALOG.items():
        click.echo(f"{check_id:28} {'cluster':11} {summary}")
    for test, declared in ACTIVE.items():
        click.echo(f"{'qualify.' + test:28} {'active':11} {declared['summary']}")


@checks_group.command("explain")
@click.argument("check_id")
def checks_explain(check_id: str) -> None:
    """What a check looks at, what it needs, its parameters and its remedy; for an active
    test (qualify.ID), its tool, invocation, figure, unit and expected values."""
    if check_id in CATALOG:
        _explain_cluster_check(check_id, CATALOG[check_id])
        return
    if check_id.startswith("qualify.") and check_id.removeprefix("qualify.") in ACTIVE:
        explain_active(check_id.removeprefix("qualify."))
        return
    spec = checks.REGISTRY.get(check_id)
    if spec is None:
        known = [*checks.REGISTRY, *CATALOG, *(f"qualify.{t}" for t in ACTIVE)]
        close = difflib.get_close_matches(check_id, known, n=1)
        raise UsageError(f"unknown check {check_id!r}"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    click.echo(f"{spec.id}: {spec.summary}")
    doc = plain("\n".join((spec.func.__doc__ or "").strip().splitlines()[1:]))
    if doc:
        click.echo(doc)
    click.echo(f"needs:   {', '.join(spec.needs) or 'nothing'}")
    click.echo(f"levels:  {', '.join(spec.levels)}")
    if spec.skip_in:
        click.echo(f"skipped in: {', '.join(sorted(spec.skip_in))}")
    if spec.params:
        click.echo(f"parameters (override under checks.{spec.id} in the config, or "
                   f"thresholds.{spec.id} in a profile):")
        docs = docs_of(spec.params_type)
        for key, value in spec.params.items():
            click.echo(f"  {key}: {json.dumps(value)}  ({kind_text(spec.schema[key])})")
            click.echo(textwrap.fill(plain(docs[key]), 92, initial_indent=" " * 6,
                                     subsequent_indent=" " * 6))
    if spec.actions:
        click.echo(f"actions: {', '.join(a.value for a in spec.actions)}")
    click.echo(f"remedy:  {spec.remedy}")
    if spec.validation is not None:
        explain_validation(spec.validation)
    click.echo(f"defined at: {defined_at(spec.func)}")


def explain_validation(validation: Validation) -> None:
    """What returns a node this check drained to service, and why that (its source)."""
    click.echo(f"return to service: {validation.describe()}")
    click.echo(textwrap.fill(plain(validation.source), 92, initial_indent=" " * 6,
                             subsequent_indent=" " * 6, break_on_hyphens=False,
                             break_long_words=False))


def kind_text(schema: Mapping[str, Any]) -> str:
    """A parameter's type, choices and bounds in words: ``an integer, at least 0``."""
    words = [describe_kinds(schema["type"])]
    if schema.get("choices"):
        words.append(f"one of {', '.join(map(str, schema['choices']))}")
    if schema.get("len") is not None:
        words.append(f"{schema['len']} items each")
    if schema.get("ge") is not None or schema.get("le") is not None:
        words.append(bounds_text(schema.get("ge"), schema.get("le")).removeprefix("must be "))
    return ", ".join(words)


# The docstrings cite the project's research notes (``<note>.md §N``), which are not
# shipped: an operator reading ``explain`` gets the sentence without the citation.
_CITED_ASIDE = re.compile(r"\s*\([^()]*\b[\w-]+\.md\b[^()]*\)")
_CITATION = re.compile(r"(?:\b(?:per|see|in) )?\b[\w-]+\.md\b(?:\s*§[\w.]+(?:,?\s*(?:and\s*)?"
                       r"§[\w.]+)*)?[,;]?\s*")


def plain(doc: str) -> str:
    """A docstring as ``explain`` prints it: plain text (no reST quotes), lines unindented,
    citations of documents that are not shipped dropped."""
    text = "\n".join(line.strip() for line in doc.splitlines()).strip().replace("``", "")
    text = _CITED_ASIDE.sub("", text)
    text = _CITATION.sub("", text)
    return re.sub(r"[ \t]+([,.;])", r"\1", text)


def defined_at(obj: Any) -> str:
    """Where a check is written, relative to the top of the install
    (``checks/gpu/memory.py:42``, the line of its ``@check``), so its room is found from
    its id."""
    top = Path(checks.__file__).resolve().parents[1]
    path = Path(inspect.getsourcefile(obj) or "?").resolve()
    line = obj.__code__.co_firstlineno if hasattr(obj, "__code__") else 1
    where = path.relative_to(top) if path.is_relative_to(top) else path
    return f"{where.as_posix()}:{line}"


def _explain_cluster_check(check_id: str, summary: str) -> None:
    """Cluster checks judge node reports side by side, so they run wherever reports meet."""
    module = importlib.import_module(f"...reports.cluster_checks.{check_id.split('.', 1)[1]}",
                                     __package__)
    click.echo(f"{check_id}: {summary}")
    doc = plain(module.__doc__ or "")
    if doc:
        click.echo(doc)
    click.echo("runs in: cluster reports (run --nodes, report merge, demo), over node reports")
    click.echo("settings: the cluster: section of the config")
    judge = getattr(module, check_id.split(".", 1)[1], module)  # cluster.versions: versions()
    click.echo(f"defined at: {defined_at(judge)}")


def example_argv(test: str) -> str | None:
    """The command line the planner (agent/qualify/plan.py) builds for a node test on an
    example node (8 GPUs, one rail mlx5_0 near GPU 0, perftest with CUDA, gpu_burn's
    compare file found) at ``--level quick`` with the default settings, every node test
    planned (tests that share a run show it whole); None for a test between nodes, whose
    command the cross-node planner builds per pair or size."""
    from ...checks.core.levels import Level  # the planner only to explain an active test
    from ..qualify.inventory import Inventory, Rail  # (the CLI's start stays light)
    from ..qualify.plan import node_steps  # idem
    from ..settings.config import Config  # idem

    if ACTIVE[test]["scope"] != "node":
        return None
    inventory = Inventory(gpus=list(range(8)), rails=[Rail("mlx5_0", 1, 0, "example")],
                          perftest_cuda=True, gpu_burn_compare="/opt/gpu-burn/compare.fatbin")
    node_tests = frozenset(t for t, d in ACTIVE.items() if d["scope"] == "node")
    steps = node_steps(inventory, Level.QUICK, Config().section("qualify"), node_tests)
    step = next((s for s in steps if test in s.tests), None)
    return None if step is None else _words((*(f"{k}={v}" for k, v in step.env), *step.argv))


def _words(argv: Any) -> str:
    return " ".join(str(a) for a in argv)


def active_facts(test: str) -> list[tuple[str, str]]:
    """What ``checks explain qualify.TEST`` says of an active test, as (label, text) rows,
    from its declaration (the manifest) and the planner; docs/checks.md prints the same."""
    declared = ACTIVE[test]
    inv = declared["invocation"]
    shared = [t for t, d in ACTIVE.items() if d["invocation"]["run"] == inv["run"]]
    rows = [("runs in", f"clusterdiag qualify, {declared['scope']} "
                        + ("(on each node alone)" if declared["scope"] == "node" else
                           f"(between nodes, at least {declared['min_nodes']})")
                        + (", on nodes with compute rails" if declared["needs_rails"] else "")),
            ("tool", f"{inv['program']} (qualify.tools.{inv['program']}, else on PATH); "
                     f"its output read by the {inv['parser']} parser"),
            ("invocation", _words((inv["program"], *inv["argv"]))
             + (f" with {_words(f'{k}={v}' for k, v in inv['env'])}" if inv["env"] else ""))]
    example = example_argv(test)
    if example is not None:
        rows.append(("as planned", f"{example} (8 GPUs, --level quick)"))
    elif inv["parser"] == "nccl-tests":
        rows.append(("launched", "one job over the nodes, one task per node (--via srun: "
                                 "srun --mpi=qualify.srun_mpi; else mpirun), {gpus} the "
                                 "fewest GPUs of its nodes"))
    else:
        rows.append(("launched", "the server on one node, the client on its partner "
                                 "(named last), every rail of the pair at once"))
    if len(shared) > 1:
        rows.append(("one run", f"{', '.join(shared)} share one {inv['program']} run"))
    rows += [("why", inv["source"]),
             ("deadline", f"{inv['deadline_s']:g} s (qualify.deadline_s.{inv['run']})")]
    if declared["fallback"] is not None:
        back = declared["fallback"]
        rows.append(("fallback", f"{_words((back['program'], *back['argv']))} where "
                                 f"{inv['program']} is not installed"))
    figure = declared["figure"] or "none: pass or fail"
    if declared["alternates"]:
        figure += f" (else {', '.join(declared['alternates'])})"
    if declared["selector"] and declared["selector"] != declared["figure"]:
        figure += f"; testcase {declared['selector']}"
    rows += [("figure", figure), ("unit", declared["unit"] or "none"),
             ("counts", declared["counts"])]
    judging = [k for k, on in declared["judging"].items() if on]
    rows += [("judged by", ", ".join(judging) or "its own pass/fail"),
             ("action", f"{declared['action']} (on a fail)"),
             ("fault", f"{declared['fault']} (the simulated fault kind that trips it)"),
             ("install", inv["install"])]
    return rows


def expected_rows(test: str, names: Iterable[str] | None = None) -> list[str]:
    """Each profile's expected figure, floor and source for ``test``, in the test's unit
    (``names``: the profiles to look at; every known one, the site's included, if None)."""
    from ...checks.profiles.profile import load_profile, profile_names  # only to explain

    rows = []
    for name in profile_names() if names is None else names:
        entry = load_profile(name).qualify.get(test)
        if entry:
            numbers = ", ".join(f"{k} {entry[k]:g}" for k in ("expected", "floor") if k in entry)
            rows.append(f"{name}: {numbers} {entry.get('unit', '')}; source: "
                        f"{entry.get('source', '')}")
    return rows


def explain_active(test: str) -> None:
    """An active test, as its declaration says (checks/qualify/active.py)."""
    click.echo(f"qualify.{test}: {ACTIVE[test]['summary']} (active test)")
    for label, text in active_facts(test):
        click.echo(textwrap.fill(text, 92, initial_indent=f"{label + ':':12}",
                                 subsequent_indent=" " * 12, break_on_hyphens=False,
                                 break_long_words=False))
    rows = expected_rows(test)
    unit = ACTIVE[test]["unit"]
    if rows:
        click.echo(f"expected, per profile (qualify.{test} in a profile, in {unit}):")
        for row in rows:
            click.echo(textwrap.fill(row, 92, initial_indent="  ", subsequent_indent="      ",
                                     break_on_hyphens=False, break_long_words=False))
    elif unit:
        click.echo(f"expected:   no profile gives one: judged against its peers only "
                   f"(qualify.{test} in a site profile, in {unit})")
    if (validation := for_qualify_test(f"qualify.{test}")) is not None:
        explain_validation(validation)
    click.echo(f"defined at: {active_defined_at(test)}")


def active_defined_at(test: str) -> str:
    """Where an active test is declared (``checks/qualify/active.py:LINE``, the line of its
    ``ActiveTest``), read from the file: the CLI reads the declarations from the manifest."""
    where = Path(checks.__file__).resolve().parent / "qualify" / "active.py"
    lines = where.read_text(encoding="utf-8").splitlines()
    line = next((n for n, text in enumerate(lines, 1)
                 if text.lstrip().startswith(f'ActiveTest("{test}",')), 1)
    return f"checks/qualify/active.py:{line}"


COMMANDS = (checks_group,)
