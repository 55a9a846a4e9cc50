from __future__ import annotations

import json
import time

import pytest

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.serde import SerdeError, from_jsonable
from clusterdiag.agent.run.collect import SOURCES, collect_snapshot
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec


def _snapshot(profile: str) -> Snapshot:
    env = env_for(NodeSpec(f"{profile}-n1", profile))
    return collect_snapshot(env, SOURCES, time.monotonic() + 10)


@pytest.mark.parametrize("profile", ["dgx-h100", "gb200-nvl72", "hgx-h100-pcie"])
def test_snapshot_survives_a_json_round_trip(profile: str) -> None:
    snap = _snapshot(profile)
    assert snap.nvml is not None
    assert snap.nvml.gpus
    text = json.dumps(snap.to_dict())
    again = Snapshot.from_dict(json.loads(text))
    assert again == snap
    assert json.dumps(again.to_dict()) == text


def test_from_jsonable_names_the_bad_path() -> None:
    data = _snapshot("dgx-h100").to_dict()
    data["nvml"]["gpus"][2]["temperature_c"] = "hot"
    with pytest.raises(SerdeError, match=r"gpus\[2\]\.temperature_c"):
        Snapshot.from_dict(data)


def test_from_jsonable_rejects_bool_for_int() -> None:
    with pytest.raises(SerdeError):
        from_jsonable(int, True)


def test_default_config_is_complete() -> None:
    assert Config().data["budget_s"] == 10.0
