"""What every benchmark shares: timing helpers, the machine's own baselines, and one way
to hand figures to ``bench/run_all.py``.

A benchmark prints its figures for a person; run with ``--json`` it prints them as one JSON
line per figure instead, which run_all collects into one table. Figures are never judged
pass/fail here: the goal is printed beside the figure and the reader decides.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import site
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from itertools import pairwise
from pathlib import Path
from typing import NoReturn

REPO = Path(__file__).resolve().parents[1]
# A plain install made once (bench/run_all.py) and reused by each benchmark it starts.
INSTALL_ENV = "CLUSTERDIAG_BENCH_INSTALL"


@dataclass
class Figure:
    name: str
    value: float
    unit: str
    goal: str = ""  # "<= 5 s", "<= 3x python3 -c pass", "" when none is set
    baseline: str = ""  # which baseline `ratio` divides by
    ratio: float | None = None


def fail(why: str) -> NoReturn:
    """The benchmark measured something other than what it claims: say so and exit 1."""
    print(f"bench: {why}", file=sys.stderr)
    sys.exit(1)


@dataclass(frozen=True)
class Install:
    """A non-editable install of this checkout: its interpreter and its console script."""

    prefix: Path
    python: str
    clusterdiag: str
    site: Path


def _install_at(prefix: Path) -> Install:
    purelib = sysconfig.get_path("purelib", vars={"base": str(prefix),
                                                  "platbase": str(prefix)})
    return Install(prefix, str(prefix / "bin" / "python"), str(prefix / "bin" / "clusterdiag"),
                   Path(purelib))


def make_install(prefix: Path) -> Install:
    """Install this checkout (not editable) into a fresh venv at ``prefix`` whose only
    other packages are this venv's dependencies (a .pth line: no editable finder runs)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    install = _install_at(prefix)
    build = prefix / "build"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--target", str(build), str(REPO)], check=True,
                   capture_output=True)
    for entry in build.iterdir():
        if entry.name != "bin":
            shutil.move(str(entry), install.site / entry.name)
    script = (build / "bin" / "clusterdiag").read_text().split("\n", 1)[1]
    Path(install.clusterdiag).write_text(f"#!{install.python}\n{script}")
    Path(install.clusterdiag).chmod(0o755)
    shutil.rmtree(build)
    (install.site / "bench-deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return install


@contextmanager
def plain_install(prefix: Path) -> Iterator[Install]:
    """The install to measure: ``$CLUSTERDIAG_BENCH_INSTALL`` when run_all made one, else a
    fresh one at ``prefix``, removed afterwards."""
    given = os.environ.get(INSTALL_ENV)
    if given:
        yield _install_at(Path(given))
        return
    try:
        yield make_install(prefix)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)


def install_note(install: Install) -> str:
    """Which code a figure measured: where the installed package's files are."""
    proc = subprocess.run([install.python, "-c", "import clusterdiag.agent as a; "
                           "print(a.__file__)"], capture_output=True, text=True, check=False)
    where = proc.stdout.strip()
    if proc.returncode != 0 or not where.startswith(str(install.site)):
        fail(f"the install at {install.prefix} imports clusterdiag from {where or proc.stderr}")
    return f"measured: non-editable install of {REPO} at {install.site}"


def module_note() -> str:
    """Which code an in-process figure measured: this interpreter's clusterdiag."""
    import clusterdiag.agent as measured

    where = Path(measured.__file__ or "?").resolve().parent
    kind = "editable checkout" if where.is_relative_to(REPO) else "installed package"
    return f"measured: clusterdiag imported from {where} ({kind})"


def median_wall(argv: list[str], runs: int = 5, env: dict[str, str] | None = None,
                ok: Callable[[subprocess.CompletedProcess[str]], str | None] | None = None
                ) -> float:
    """Median wall seconds of a whole command, the way an operator would time it. Every
    run must pass ``ok`` (None: what it printed is right; else why not), by default exit
    status 0, or the benchmark fails: a figure of a command that failed is not one."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
        times.append(time.perf_counter() - started)
        why = ok(proc) if ok is not None else (
            None if proc.returncode == 0 else f"exit status {proc.returncode}")
        if why is not None:
            fail(f"{' '.join(argv[:4])}...: {why}: {proc.stderr.strip()[-300:]}")
    return statistics.median(times)


def median_call(func: Callable[[], object], runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        func()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def python_start_s(runs: int = 7) -> float:
    """The interpreter's own start: the floor any command of ours stands on."""
    return median_wall([sys.executable, "-c", "pass"], runs)


def growth(what: str, seconds: dict[int, float]) -> list[Figure]:
    """How time grows between successive sizes, as the exponent k in t ~ n^k: 1 is linear,
    and n log n over a decade reads about 1.1."""
    sizes = sorted(seconds)
    return [Figure(f"{what} time growth {small:,} -> {big:,} (exponent)",
                   round(math.log(seconds[big] / seconds[small]) / math.log(big / small), 2),
                   "", "<= ~1.1 (n log n)")
            for small, big in pairwise(sizes)]


def emit(figures: list[Figure]) -> None:
    """Print the figures: JSON lines under --json (for run_all), a table otherwise."""
    if "--json" in sys.argv[1:]:
        for figure in figures:
            print(json.dumps(asdict(figure)))
        return
    print(table(figures))


def table(figures: list[Figure]) -> str:
    rows = [("figure", "value", "goal", "ratio to baseline")]
    for f in figures:
        ratio = "" if f.ratio is None else \
            f"{f.ratio:.1f}x {f.baseline}" if f.ratio >= 1 else f"{f.ratio:.2g}x {f.baseline}"
        rows.append((f.name, f"{f.value:g} {f.unit}", f.goal, ratio))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)
