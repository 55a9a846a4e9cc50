"""Name resolution counts against each node's time: a resolver that never
answers (here ``socket.getaddrinfo`` made to hang, as a DNS server that drops queries
would) costs each node its connect + read time, never the run its minutes."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import pytest

from clusterdiag.reports.fleet.gather import GatherSettings, gather_agent

NODES = 200


def test_unresolvable_names_end_within_each_nodes_time(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    released = threading.Event()

    def hang(*args: Any, **kwargs: Any) -> Any:
        released.wait(30)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    monkeypatch.setattr(socket, "getaddrinfo", hang)
    urls = {f"n{i}": f"http://n{i}.cluster.invalid:9464" for i in range(NODES)}
    settings = GatherSettings(connect_timeout_s=1.0, read_timeout_s=1.0, retries=0,
                              concurrency=256, deadline_s=60)
    started = time.monotonic()
    try:
        summaries, failures = gather_agent(urls, settings)
    finally:
        released.set()
    took = time.monotonic() - started
    assert not summaries
    assert {f.node for f in failures} == set(urls)
    assert {f.reason for f in failures} == {"no complete answer within 2 s"}, failures[:3]
    assert took < 30, took  # 2 s per node, all at once: not 200 names queued 6 at a time
