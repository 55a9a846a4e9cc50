"""``checks explain`` is plain text for an operator: no reST quoting, and no citations of
the project's research notes, which are not shipped."""

from __future__ import annotations

import importlib

import pytest

from clusterdiag import checks
from clusterdiag.agent.cli.checks import plain
from clusterdiag.reports.cluster_checks import CATALOG
from tests.conftest import run_cli

INTERNAL = (".md", "§", "DESIGN", "``")


def _docs() -> list[tuple[str, str]]:
    docs = [(spec.id, spec.func.__doc__ or "") for spec in checks.select(None)]
    for check_id in CATALOG:
        module = importlib.import_module(
            f"clusterdiag.reports.cluster_checks.{check_id.split('.', 1)[1]}")
        docs.append((check_id, module.__doc__ or ""))
    return docs


def test_some_docstrings_do_cite_notes() -> None:
    """The test below would pass vacuously if nothing cited them."""
    assert sum(any(mark in doc for mark in INTERNAL) for _, doc in _docs()) >= 5


@pytest.mark.parametrize(("check_id", "doc"), _docs(), ids=[i for i, _ in _docs()])
def test_explained_text_cites_nothing_internal(check_id: str, doc: str) -> None:
    text = plain(doc)
    for mark in INTERNAL:
        assert mark not in text, (check_id, text)
    assert "()" not in text
    assert " ," not in text
    assert " ." not in text


def test_explain_prints_the_plain_text() -> None:
    proc = run_cli("checks", "explain", "fabric.state")
    assert proc.returncode == 0
    assert proc.stdout.startswith("fabric.state: ")
    assert "COMPLETED" in proc.stdout
    assert "``" not in proc.stdout


def test_a_citation_of_a_note_goes_and_its_sentence_stays() -> None:
    """Check docstrings now cite primary sources; a note cited again must still not reach
    the operator."""
    doc = """Healthy is state COMPLETED with status SUCCESS (hardware.md §1.13). NOT_STARTED
    waits; see expected.md §2, §3 and the ``nvml.h`` enum."""
    text = plain(doc)
    assert text.startswith("Healthy is state COMPLETED with status SUCCESS.")
    assert "NOT_STARTED" in text
    assert "nvml.h enum" in text
    for mark in INTERNAL:
        assert mark not in text, text
