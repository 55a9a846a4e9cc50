"""The agent's unit bounds glibc's malloc arenas (systemd/clusterdiag-agent.service,
docs/agent.md#memory): the environment bench/agent_load.py measures the agent in."""

from __future__ import annotations

from tests.conftest import REPO

UNIT = REPO / "systemd" / "clusterdiag-agent.service"


def test_the_unit_bounds_malloc_arenas() -> None:
    lines = UNIT.read_text().splitlines()
    environment = [line.removeprefix("Environment=") for line in lines
                   if line.startswith("Environment=")]
    assert environment == ["MALLOC_ARENA_MAX=2"]
