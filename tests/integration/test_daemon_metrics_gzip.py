"""``GET /metrics`` through the real agent on loopback, compressed when the scraper asks:
Prometheus sends ``Accept-Encoding: gzip`` on every scrape by default, and a dgx-h100's
text is about twenty times its gzip."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from tests.integration.daemon_helpers import AgentProc, get


def test_metrics_are_gzipped_when_asked_and_plain_otherwise(tmp_path: Path) -> None:
    agent = AgentProc(tmp_path, interval=300)  # no second collection between the scrapes
    try:
        url = agent.wait_ready()
        plain = get(f"{url}/metrics")
        packed = get(f"{url}/metrics", headers={"Accept-Encoding": "gzip"})
        refused = get(f"{url}/metrics", headers={"Accept-Encoding": "gzip;q=0, identity"})
    finally:
        agent.stop()
    status, body, headers = plain
    assert status == 200
    assert "Content-Encoding" not in headers
    assert headers["Vary"] == "Accept-Encoding"
    assert body.startswith(b"# HELP clusterdiag_")
    status, zipped, headers = packed
    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert headers["Vary"] == "Accept-Encoding"
    assert headers["Content-Type"].startswith("text/plain")
    assert gzip.decompress(zipped) == body
    assert len(zipped) * 5 < len(body)
    assert "Content-Encoding" not in refused[2]
    assert refused[1] == body


@pytest.mark.parametrize(("header", "wanted"), [
    (None, False), ("", False), ("identity", False), ("gzip", True), ("GZIP", True),
    ("deflate, gzip;q=0.5", True), ("x-gzip", True), ("gzip;q=0", False),
    ("gzip; q=0.0", False), ("gzip;q=bogus", False), ("gzipped", False), ("br, zstd", False),
])
def test_which_accept_encoding_asks_for_gzip(header: str | None, wanted: bool) -> None:
    from clusterdiag.agent.daemon.metrics import accepts_gzip  # what the handler asks

    assert accepts_gzip(header) is wanted
