"""The documentation stays true and self-contained: the generated pages match the code, the
README is short and its table of contents works, every link stays inside the repository
and lands on a file (and heading) that exists, no issue numbers, and the LICENSE is the
Apache License 2.0 that pyproject.toml names."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from dev import docs as generated
from tests.conftest import REPO
from tests.test_layering import LAYERS

README = REPO / "README.md"
README_MAX_BYTES = 15_000
DOC_FILES = sorted((REPO / "docs").glob("*.md"))

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
_ISSUE = re.compile(r"\bissues?\s*#?\s*\d+", re.I)
_FORBIDDEN = ("../shared", "this session")


@cache
def _pages() -> dict[str, str]:
    return generated.pages()


def _prose(text: str) -> str:
    """Markdown without its code blocks and code spans, where links are not links."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    """Every link and image target of a Markdown text, reference definitions included."""
    prose = _prose(text)
    return [m.group(1) for m in _LINK.finditer(prose)] + \
        [m.group(1) for m in _REFERENCE.finditer(prose)]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to
    hyphens."""
    text = re.sub(r"`|\*\*|__", "", heading).strip().lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors of a Markdown text's headings (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    found = set()
    for match in _HEADING.finditer(_FENCE.sub("", text)):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def link_problems(source: Path, text: str, repo: Path = REPO) -> list[str]:
    """Why each link of ``source`` is wrong: it leaves the repository, names the shared
    folder, or lands on no file or no heading."""
    problems = []
    for target in links(text):
        where = f"{source.relative_to(repo)}: ({target})"
        if not target:
            problems.append(f"{where}: empty link")
            continue
        if _SCHEME.match(target) or target.startswith(("/", "//")):
            problems.append(f"{where}: leaves the repository (link to a file in it)")
            continue
        path_part, _, anchor = target.partition("#")
        if "shared/" in path_part:
            problems.append(f"{where}: names the shared folder, which is not in the repository")
            continue
        if not path_part:
            if anchor not in anchors(text):
                problems.append(f"{where}: no heading #{anchor} here")
            continue
        file = (source.parent / path_part).resolve()
        if not file.is_relative_to(repo.resolve()):
            problems.append(f"{where}: leaves the repository")
            continue
        if not file.exists():
            problems.append(f"{where}: no such file")
            continue
        if anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            problems.append(f"{where}: no heading #{anchor} in {file.relative_to(repo)}")
    return problems


def toc_problems(text: str) -> list[str]:
    """What is wrong with a README's table of contents: missing, a link that names no
    heading, or a section it leaves out."""
    match = re.search(r"^## Contents\s*$(.*?)(?=^## )", text, re.M | re.S)
    if match is None:
        return ["no '## Contents' section before the first other section"]
    entries = re.findall(r"^\s*[-*]\s+\[[^\]]+\]\(#([^)]+)\)\s*$", match.group(1), re.M)
    if not entries:
        return ["the Contents section lists no [section](#anchor) links"]
    headings = anchors(text)
    problems = [f"#{e}: no such heading" for e in entries if e not in headings]
    sections = [slug(h) for h in re.findall(r"^## (.*?)\s*$", _FENCE.sub("", text), re.M)]
    problems += [f"## {s}: not in the Contents" for s in sections
                 if s != "contents" and s not in entries]
    return problems


def forbidden_words(text: str) -> list[str]:
    found = [m.group(0) for m in _ISSUE.finditer(text)]
    return found + [word for word in _FORBIDDEN if word in text]


# (a) the generated pages ---------------------------------------------------------------

def test_the_generated_pages_match_the_code() -> None:
    stale = [path.name for path, text in generated.generated().items()
             if not path.is_file() or path.read_text(encoding="utf-8") != text]
    assert not stale, (f"stale generated docs {stale}: run `{generated.REGENERATE}` and "
                       "commit what it writes")


def test_the_layer_map_page_names_every_folder_the_test_holds() -> None:
    page = _pages()[generated.LAYERS_PAGE]
    for folder in LAYERS:
        assert f"| `{'/'.join(folder.split('.')[1:])}` |" in page, folder


def test_the_check_page_lists_every_check_and_its_parameters() -> None:
    from clusterdiag import checks
    from clusterdiag.reports.cluster_checks import CATALOG

    page = _pages()[generated.CHECKS_PAGE]
    headings = anchors(page)
    for spec in checks.select(None):
        assert slug(spec.id) in headings, spec.id
        for name in spec.params:
            assert f"| `{name}` |" in page, f"{spec.id}: parameter {name}"
    for check_id in CATALOG:
        assert slug(check_id) in headings, check_id


def test_the_metrics_page_lists_every_family_the_agent_serves() -> None:
    page = _pages()[generated.METRICS_PAGE]
    names = set(re.findall(r"^\| `(clusterdiag_[a-z_]+)`", page, re.M))
    assert {"clusterdiag_node_ready", "clusterdiag_check_status",
            "clusterdiag_gpu_responsive", "clusterdiag_ib_port_active",
            "clusterdiag_xid_events_total"} <= names
    assert not re.search(r"\d+\.\d+\.\d+\.\d+|GPU-[0-9a-f]{8}", page), \
        "the metrics page must hold no values, addresses or UUIDs"


def test_metric_families_are_read_from_the_exposition() -> None:
    text = ('# HELP clusterdiag_b_total Events.\n# TYPE clusterdiag_b_total counter\n'
            'clusterdiag_b_total{gpu="0",code="79"} 3.0\n'
            '# HELP clusterdiag_a Up.\n# TYPE clusterdiag_a gauge\nclusterdiag_a 1.0\n')
    assert generated.metric_families(text) == [
        {"names": ["clusterdiag_a"], "type": "gauge", "help": "Up.", "labels": []},
        {"names": ["clusterdiag_b_total"], "type": "counter", "help": "Events.",
         "labels": ["code", "gpu"]}]


# (b) the README ------------------------------------------------------------------------

def test_the_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, (f"README.md is {size:,} bytes, more than "
                                      f"{README_MAX_BYTES:,}: move detail into docs/")


def test_the_readme_has_a_table_of_contents_that_works() -> None:
    problems = toc_problems(README.read_text())
    assert not problems, "README.md's Contents:\n" + "\n".join(problems)


def test_a_broken_table_of_contents_is_found() -> None:
    good = "# t\n\n## Contents\n\n- [A b](#a-b)\n\n## A b\n\ntext\n"
    assert toc_problems(good) == []
    assert toc_problems(good.replace("(#a-b)", "(#a-c)")) == ["#a-c: no such heading",
                                                             "## a-b: not in the Contents"]
    assert toc_problems("# t\n\n## A b\n") == [
        "no '## Contents' section before the first other section"]


# (c) links -----------------------------------------------------------------------------

@pytest.mark.parametrize("page", [README, *DOC_FILES], ids=lambda p: p.name)
def test_every_link_stays_in_the_repository_and_lands(page: Path) -> None:
    problems = link_problems(page, page.read_text())
    assert not problems, "\n".join(problems)


def test_links_that_leave_or_miss_are_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/there.md").write_text("# There\n\n## A part\n")
    page = tmp_path / "docs/page.md"
    text = ("[ok](there.md) [ok](there.md#a-part) [ok](#here) ![img](there.md)\n"
            "[up](../../outside.md) [shared](../shared/DESIGN.md) [web](https://example.com)"
            " [gone](missing.md) [anchor](there.md#nothing) [self](#nowhere)"
            " `[code](../x.md)`\n\n# Here\n"
            "```\n[fenced](../../x.md)\n```\n[ref]: ../../elsewhere.md\n")
    problems = link_problems(page, text, tmp_path)
    assert [p.split(": (", 1)[1].split(")", 1)[0] for p in problems] == [
        "../../outside.md", "../shared/DESIGN.md", "https://example.com", "missing.md",
        "there.md#nothing", "#nowhere", "../../elsewhere.md"]


def test_the_readme_and_docs_are_all_checked() -> None:
    names = {p.name for p in DOC_FILES}
    assert {"design.md", "commands.md", "checks.md", "metrics.md", "formats.md",
            "development.md", "changelog.md", "benchmarks.md"} <= names
    assert "[docs/design.md](docs/design.md)" in README.read_text()


# (d) no issue numbers, no references outside ------------------------------------------

@pytest.mark.parametrize("page", [README, *DOC_FILES], ids=lambda p: p.name)
def test_no_issue_numbers_or_references_outside(page: Path) -> None:
    found = forbidden_words(page.read_text())
    assert not found, f"{page.relative_to(REPO)}: {found} (say what changed for users)"


def test_issue_numbers_are_found() -> None:
    assert forbidden_words("Fixed in Issue 15 and issues #3; see ../shared/x") == [
        "Issue 15", "issues #3", "../shared"]
    assert forbidden_words("the issue of timing; 15 issues") == []


# (e) the license -----------------------------------------------------------------------

APACHE_SECTIONS = ("1. Definitions.", "2. Grant of Copyright License.",
                   "3. Grant of Patent License.", "4. Redistribution.",
                   "5. Submission of Contributions.", "6. Trademarks.",
                   "7. Disclaimer of Warranty.", "8. Limitation of Liability.",
                   "9. Accepting Warranty or Additional Liability.")


def test_the_license_is_the_apache_license_2_0() -> None:
    license_file = REPO / "LICENSE"
    assert license_file.is_file(), "LICENSE is missing: the Apache License 2.0 text"
    text = " ".join(license_file.read_text().split())
    assert text.startswith("Apache License Version 2.0, January 2004"), text[:80]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text
    missing = [s for s in APACHE_SECTIONS if s not in text]
    assert not missing, f"LICENSE lacks {missing}"
    assert "END OF TERMS AND CONDITIONS" in text


def test_pyproject_names_the_same_license() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^license\s*=\s*(?:\{\s*text\s*=\s*)?"Apache-2\.0"', pyproject, re.M), \
        "pyproject.toml's license must be Apache-2.0, as LICENSE is"
