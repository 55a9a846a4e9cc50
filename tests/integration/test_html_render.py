"""The HTML report as a browser shows it: headless Chromium renders the demo cluster's
report to a PNG, which must not be blank and must show the verdict banner with its text.

Chromium runs with no network and no sandbox (a container), and the page may not fetch
anything: the file is self-contained, so what Chromium paints is all there is.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.conftest import run_cli

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NOT_READY_RED = (0xC6, 0x28, 0x28)  # header.bad in reports/render/html.py CSS
WHITE = (0xFF, 0xFF, 0xFF)
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-extensions", "--disable-dev-shm-usage", "--disable-sync",
         "--no-first-run", "--hide-scrollbars", "--window-size=1280,1000")


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def png_rows(data: bytes, limit: int) -> tuple[int, int, list[list[tuple[int, int, int]]]]:
    """Width, height and the first ``limit`` rows of an 8-bit RGB/RGBA PNG as pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        header = chunk if kind == b"IHDR" else header
        idat += chunk if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8, depth
    assert colour in (2, 6), colour
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, previous = [], bytearray(stride)
    for y in range(min(limit, height)):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1)
                                                          * (stride + 1)])
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b, c = previous[x], previous[x - bpp] if x >= bpp else 0
            line[x] = (line[x] + (0, a, b, (a + b) // 2, _paeth(a, b, c))[kind]) & 0xFF
        rows.append([tuple(line[i:i + 3]) for i in range(0, stride, bpp)])
        previous = line
    return width, height, rows


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium")
def test_demo_report_renders_with_the_verdict(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    proc = run_cli("demo", "--format", "html", "--output", str(page), timeout=60)
    assert proc.returncode == 1, proc.stderr
    shot = tmp_path / "report.png"
    subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                    f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=90,
                   check=False)
    assert shot.is_file(), "chromium wrote no screenshot"
    width, height, rows = png_rows(shot.read_bytes(), limit=110)
    assert (width, height) == (1280, 1000)
    banner = [px for row in rows[5:95] for px in row]
    red = sum(px == NOT_READY_RED for px in banner)
    white = sum(px == WHITE for px in banner)
    assert red > 0.8 * len(banner), "no red NOT READY banner across the top"
    assert white > 500, "the banner carries no text"
    # A blank 1280x1000 page compresses to a few KB; tables, grid and text do not.
    assert shot.stat().st_size > 30_000, "the page is close to blank"
