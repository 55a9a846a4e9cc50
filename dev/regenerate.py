"""Every generated file of the repository, rewritten from today's code:

    python -m dev.regenerate            # rewrite what changed, name each file
    python -m dev.regenerate --check    # exit 1 naming the stale files, write nothing

Run from the repository's root after changing a check, a profile, a report, a metric or
what the Slurm programs import; commit what it rewrote (the diff is the review). What it
writes, and who makes each:

- checks/catalogs/manifest.py and profile_data.py: the check catalog and the built-in
  profiles as plain data (clusterdiag.checks.core.generate);
- docs/checks.md and docs/metrics.md: the catalog and the agent's Prometheus series
  (dev/docs.py);
- tests/golden/*: the golden node and cluster reports (tests/golden.py);
- tests/fixtures/prolog_imports.json: the modules each Slurm program's path loads
  (tests/prolog_paths.py).

On a clean checkout it changes nothing; each staleness test names this command.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from clusterdiag.checks.core import generate as catalogs
from dev import docs
from tests import golden, prolog_paths

REPO = Path(__file__).resolve().parents[1]
MAKERS: tuple[tuple[str, Callable[[], dict[Path, str]]], ...] = (
    ("catalogs", catalogs.generated), ("docs", docs.generated), ("golden", golden.generated),
    ("prolog imports", prolog_paths.generated))


def stale() -> dict[Path, str]:
    """Each generated file whose committed text is not today's, with today's text."""
    found = {}
    for _, make in MAKERS:
        for path, text in make().items():
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                found[path] = text
    return found


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print("usage: python -m dev.regenerate [--check]", file=sys.stderr)
        return 2
    changed = stale()
    for path, text in changed.items():
        where = path.relative_to(REPO)
        if argv:
            print(f"stale: {where}")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {where}")
    if argv and changed:
        print("run python -m dev.regenerate and commit what it writes", file=sys.stderr)
    return 1 if argv and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
