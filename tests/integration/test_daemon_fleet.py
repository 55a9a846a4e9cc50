"""Fleet: many simulated agents in one process, each on its own loopback address."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from typing import Any

import pytest

from clusterdiag.agent.cluster.fleet import Fleet, address
from clusterdiag.agent.sim.faults.catalog import FAULTS, FaultKind
from clusterdiag.agent.sim.spec import ClusterSpec, NodeSpec, parse_spec
from clusterdiag.agent.sim.state.hardware import SimNode
from tests.integration.daemon_helpers import get

TOKEN = "fleet-token-0123456789abcdef"


def _serve(how: str) -> FaultKind:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        node.serve = how
    return FaultKind(f"test_serve_{how}", "cluster.reachability", "fail", "investigate",
                     "node", (), apply)


@pytest.fixture
def serve_faults(monkeypatch: pytest.MonkeyPatch) -> None:
    for how in ("garbage", "unreachable"):
        kind = _serve(how)
        monkeypatch.setitem(FAULTS, kind.kind, kind)


def test_addresses_skip_network_and_broadcast() -> None:
    assert [address(i) for i in (0, 1, 252, 253, 999)] == [
        "127.0.0.2", "127.0.0.3", "127.0.0.254", "127.0.1.1", "127.0.3.239"]


def _closed(url: str) -> bool:
    host, port = url[7:].rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=2).close()
    except OSError:
        return True
    return False


def test_fleet_serves_real_reports_per_node(serve_faults: None) -> None:
    spec = parse_spec({"nodes": [{"names": "gpu[01-05]", "profile": "dgx-h100"}],
                       "faults": [{"node": "gpu02", "kind": "nvlink_down", "gpu": 3,
                                   "link": 7}]}, "test")
    spec.nodes["gpu04"].faults.append({"node": "gpu04", "kind": "test_serve_garbage"})
    spec.nodes["gpu05"].faults.append({"node": "gpu05", "kind": "test_serve_unreachable"})
    fleet = Fleet(spec, token=TOKEN)
    with fleet:
        urls = fleet.urls
        assert list(urls) == [f"gpu0{i}" for i in range(1, 6)]
        assert urls["gpu01"].startswith("http://127.0.0.2:")
        assert len({u.rsplit(":", 1)[1] for u in urls.values()}) == 1
        reports = {}
        for name in ("gpu01", "gpu02", "gpu03"):
            status, body, _ = get(urls[name] + "/v1/report", TOKEN)
            assert status == 200
            reports[name] = json.loads(body)
            assert reports[name]["node"] == name
        assert get(urls["gpu01"] + "/v1/report")[0] == 401
        assert reports["gpu01"]["verdict"] == "pass"
        assert reports["gpu02"]["verdict"] == "fail"
        assert any(f["check"] == "nvlink.links_up" and f["status"] == "fail"
                   for f in reports["gpu02"]["findings"])
        uuids = [r["inventory"]["gpus"][0]["uuid"] for r in reports.values()]
        assert len(set(uuids)) == 3  # each node its own GPUs
        status, body, _ = get(urls["gpu04"] + "/v1/report", TOKEN)
        assert status == 200
        with pytest.raises(json.JSONDecodeError, match="Expecting value"):
            json.loads(body)
        assert _closed(urls["gpu05"])
        assert get(urls["gpu01"] + "/metrics", TOKEN)[0] == 200
    assert all(_closed(u) for u in urls.values())
    fleet.close()  # idempotent


def test_port_can_be_given(serve_faults: None) -> None:
    spec = ClusterSpec({"a": NodeSpec("a", "dgx-a100")}, "t")
    with socket.socket() as probe:
        probe.bind(("127.0.0.2", 0))
        port = probe.getsockname()[1]
    with Fleet(spec, port=port) as fleet:
        assert fleet.urls == {"a": f"http://127.0.0.2:{port}"}
        assert get(fleet.urls["a"] + "/healthz")[0] == 200
