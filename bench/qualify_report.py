"""The qualification report a person reads, as the cluster grows: at 16, 128 and 1,024
synthetic DGX H100 nodes (8 GPUs and 8 rails each, the planted outliers of
tests/integration/qualify_scale.py), the HTML report's size against the 16-node one's, the
time headless Chromium takes to load it and write a screenshot against a blank page's
(the anchor, measured alternately in the same run, medians of three), clusterdiag's own
rendering time, and the terminal report's lines. Every page must hold the verdict and every
planted node, and Chromium must write its screenshot, or the figures are not the report's
and the benchmark fails.

    .venv/bin/python bench/qualify_report.py [--quick] [--json]
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, Figure, emit, fail, module_note

sys.path.insert(0, str(REPO))  # the synthetic report lives with the tests
from clusterdiag.reports.render.qualify import render_html, render_terminal
from tests.integration.qualify_scale import build

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,1000")
RUNS = 3


def chromium_s(page: Path, work: Path, least_bytes: int = 0) -> float:
    """One headless Chromium run over ``page`` with a new empty profile, to its screenshot
    (of at least ``least_bytes``: a blank screenshot is a few kilobytes)."""
    shot = work / f"{page.stem}.png"
    shot.unlink(missing_ok=True)
    profile = Path(tempfile.mkdtemp(prefix="profile-", dir=work))
    started = time.perf_counter()
    subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=300,
                   check=False)
    seconds = time.perf_counter() - started
    shutil.rmtree(profile, ignore_errors=True)
    if not shot.is_file() or shot.stat().st_size < least_bytes:
        fail(f"chromium wrote no screenshot of {page.name}")
    return seconds


def main() -> None:
    print(module_note(), file=sys.stderr)
    if CHROMIUM is None:
        print("chromium not on PATH: render times not measured", file=sys.stderr)
    sizes = [16, 128] if "--quick" in sys.argv else [16, 128, 1024]
    figures: list[Figure] = []
    anchor_bytes = 0
    with tempfile.TemporaryDirectory(prefix="clusterdiag-qualify-report-") as tmp:
        work = Path(tmp)
        blank = work / "blank.html"
        blank.write_text("<!doctype html><title>blank</title>\n")
        for count in sizes:
            report, planted = build(count)
            started = time.perf_counter()
            page = render_html(report)
            render_s = time.perf_counter() - started
            text = render_terminal(report)
            missing = [n for n in planted.nodes if n not in page or n not in text]
            if not page.count("QUALIFY NOT READY") or missing:
                fail(f"{count:,} nodes: the report does not name {missing or 'its verdict'}")
            path = work / f"qualify-{count}.html"
            path.write_text(page)
            size = len(page.encode())
            anchor_bytes = anchor_bytes or size
            goal = count == 1024
            figures += [
                Figure(f"qualify report, {count:,} nodes: HTML size", round(size / 1e3, 1),
                       "kB", "< 5 MB" if goal else "", f"the {sizes[0]}-node report "
                       f"({anchor_bytes / 1e3:.1f} kB)", round(size / anchor_bytes, 2)),
                Figure(f"qualify report, {count:,} nodes: render_html", round(render_s * 1e3, 1),
                       "ms"),
                Figure(f"qualify report, {count:,} nodes: terminal lines (160 columns)",
                       len(text.splitlines()), "lines", "a few hundred at most" if goal else ""),
            ]
            if CHROMIUM is None:
                continue
            pages, blanks = [], []
            for _ in range(RUNS):  # alternating, so the machine's load falls on both
                blanks.append(chromium_s(blank, work))
                pages.append(chromium_s(path, work, 30_000))
            page_s, blank_s = statistics.median(pages), statistics.median(blanks)
            figures.append(Figure(
                f"qualify report, {count:,} nodes: headless Chromium load and screenshot",
                round(page_s, 2), "s", "< 5 s" if goal else "",
                f"a blank page ({blank_s:.2f} s)", round(page_s / blank_s, 2)))
    emit(figures)


if __name__ == "__main__":
    main()
