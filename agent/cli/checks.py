"""``clusterdiag checks list|explain ID``: the check catalog, node and cluster checks."""

from __future__ import annotations

import difflib
import importlib
import inspect
import json
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from ... import checks
from ...checks.core.params import docs_of
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


@checks_group.command("explain")
@click.argument("check_id")
def checks_explain(check_id: str) -> None:
    """What a check looks at, what it needs, its parameters and its remedy."""
    if check_id in CATALOG:
        _explain_cluster_check(check_id, CATALOG[check_id])
        return
    spec = checks.REGISTRY.get(check_id)
    if spec is None:
        close = difflib.get_close_matches(check_id, [*checks.REGISTRY, *CATALOG], n=1)
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
    click.echo(f"defined at: {defined_at(spec.func)}")


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


COMMANDS = (checks_group,)
