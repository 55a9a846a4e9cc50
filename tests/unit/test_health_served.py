"""``GET /v1/health`` and the ``clusterdiag_health_*`` series: the lifecycle file as the
agent serves it, behind the same token as ``/v1/report`` (loopback only)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import generate_latest

from clusterdiag.agent.daemon.metrics import AgentView, registry_for
from clusterdiag.agent.daemon.server import make_app
from clusterdiag.agent.health import store
from clusterdiag.agent.health.lifecycle import Health, Incident
from clusterdiag.agent.health.store import HealthFile

TOKEN = "a-token-of-enough-length-0123456789"


class _Api:
    def __init__(self, state: Path) -> None:
        self.view = AgentView(health=HealthFile(state))

    def report_body(self) -> bytes | None:
        return b"{}"

    def snapshot_body(self) -> bytes | None:
        return None

    def health_body(self) -> bytes:
        assert self.view.health is not None
        return store.body(self.view.health.current())

    def metrics_body(self) -> bytes:
        return generate_latest(registry_for(lambda: self.view))

    async def refresh(self) -> None:
        return None

    async def clear(self, event_id: str) -> list[str]:
        return []


def _drained(state: Path, at: float) -> Health:
    health = Health()
    health.drain(Incident("nvlink", "nvlink.error_rate", "gpu3", "crc 12/s", at))
    store.save(state, health)
    return health


async def _get(api: _Api, path: str, token: str | None) -> tuple[int, bytes]:
    app = make_app(lambda request: api, lambda: TOKEN)  # type: ignore[arg-type,return-value]
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = await client.get(path, headers=headers)
        return response.status, await response.read()


def test_the_lifecycle_is_served_behind_the_token(tmp_path: Path) -> None:
    api = _Api(tmp_path)
    status, body = asyncio.run(_get(api, "/v1/health", None))
    assert status == 401
    assert b"drained" not in body
    status, body = asyncio.run(_get(api, "/v1/health", TOKEN))
    assert (status, json.loads(body)["state"]) == (200, "healthy")
    health = _drained(tmp_path, 1000.0)
    status, body = asyncio.run(_get(api, "/v1/health", TOKEN))
    assert (status, json.loads(body)) == (200, store.to_dict(health))


def test_the_series_say_state_incidents_and_time_since(tmp_path: Path) -> None:
    api = _Api(tmp_path)
    text = api.metrics_body().decode()
    assert 'clusterdiag_health_state{state="healthy"} 1.0' in text
    assert "clusterdiag_health_seconds_since_incident" not in text
    _drained(tmp_path, 1000.0)
    text = api.metrics_body().decode()
    assert 'clusterdiag_health_state{state="drained"} 1.0' in text
    assert 'clusterdiag_health_state{state="healthy"} 0.0' in text
    assert 'clusterdiag_health_incidents_total{family="nvlink"} 1.0' in text
    since = next(line for line in text.splitlines()
                 if line.startswith("clusterdiag_health_seconds_since_incident "))
    assert float(since.split()[1]) > 1e9  # now minus 1000 s after the epoch
