"""Property-based tests for the loaders of files people edit by hand or a crash may leave
half-written: simulation specs and the agent's state directory.

The property: a spec is a ClusterSpec or a one-line UsageError (exit 2 through the
command), and a state file is read, or set aside and logged, never a crash.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.daemon.state import EVENTS, SNAPSHOT, StateDir
from clusterdiag.agent.sim.spec import ClusterSpec, load_spec
from tests.conftest import run_cli

SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 40), st.floats(allow_nan=False),
                    st.text(max_size=8),
                    st.sampled_from(["dgx-h100", "gb200-nvl72", "n[1-2]", "n1", "n[", "x",
                                     "nvlink_down", "nvml_call_error", "ib_port_down",
                                     "mlx5_0", "-1", "1e9"]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(scalars.filter(lambda v: v is not None
                                                                and not isinstance(v, float)),
                                                 inner, max_size=3)), max_leaves=8)
node_entry = st.fixed_dictionaries(
    {"names": st.one_of(st.sampled_from(["n1", "n[1-2]", "n[", ""]), values),
     "profile": st.one_of(st.sampled_from(["dgx-h100", "gb200-nvl72", "nope"]), values)},
    optional={"rack": values, "clique": values, "extra": values})
fault_entry = st.fixed_dictionaries(
    {"node": st.one_of(st.sampled_from(["n1", "n2", "n[1-2]", "zz"]), values),
     "kind": st.one_of(st.sampled_from(["nvlink_down", "nvml_call_error", "ib_port_down",
                                        "gpu_hang", "bogus"]), values)},
    optional={"gpu": values, "link": values, "hca": values, "port": values,
              "function": values, "error": values, 7: values, True: values})
specs = st.one_of(
    values,
    st.fixed_dictionaries({"nodes": st.lists(st.one_of(node_entry, values), max_size=3)},
                          optional={"faults": st.one_of(st.lists(st.one_of(fault_entry, values),
                                                                 max_size=3), values),
                                    "other": values, 1: values}),
)


def _load(path: Path) -> ClusterSpec | UsageError:
    try:
        return load_spec(str(path))
    except UsageError as exc:
        return exc


@SETTINGS
@given(doc=specs)
@example(doc={"nodes": [{"names": "n1", "profile": "dgx-h100"}], "faults": 1})
def test_spec_loads_or_says_why_in_one_line(tmp_path: Path, doc: object) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = _load(path)
    if isinstance(result, UsageError):
        assert str(result).startswith(f"simulation spec {path}:"), result
        assert "\n" not in str(result)
        return
    assert result.nodes
    for node in result.nodes.values():
        assert isinstance(node.clique, int)


@SETTINGS
@given(data=st.one_of(st.binary(max_size=80), st.text(max_size=80).map(str.encode)))
def test_spec_bytes_that_are_not_yaml_are_a_usage_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(data)
    result = _load(path)
    assert isinstance(result, (ClusterSpec, UsageError))
    assert "\n" not in str(result) or isinstance(result, ClusterSpec)


@pytest.mark.parametrize("text", [
    b"\xff\xfe nodes: []",
    b"nodes:\n  - {names: n1, profile: dgx-h100, clique: x}\n",
    b"nodes:\n  - {names: n1, profile: [dgx-h100]}\n",
    b"nodes:\n  - {names: n1, profile: dgx-h100, 3: x, r: y}\n",
    b"nodes:\n  - {names: n1, profile: dgx-h100}\nfaults:\n  - {node: n1, kind: nvlink_down,"
    b" gpu: x, link: 1}\n",
    b"nodes: []\n",
    b"[" * 5000,
])
def test_bad_spec_through_the_command_is_exit_2(tmp_path: Path, text: bytes) -> None:
    path = tmp_path / "spec.yaml"
    path.write_bytes(text)
    proc = run_cli("run", "--simulate", str(path), "--format", "json", timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"clusterdiag: simulation spec {path}:"), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


state_bytes = st.one_of(
    st.binary(max_size=100),
    values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"version": values, "events": st.lists(st.one_of(
        values, st.fixed_dictionaries({"id": values, "xid": values, "time": values},
                                      optional={"cleared": values, "gpu_index": values})),
        max_size=4)}).map(lambda v: json.dumps(v).encode()),
    st.integers(100, 3000).map(lambda n: b"[" * n * 10),
)


@SETTINGS
@given(data=state_bytes)
def test_state_files_are_read_or_set_aside(tmp_path: Path, data: bytes,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """Whatever is in events.json, the events come back as a list of well-formed events;
    a file that is not JSON is renamed aside, so the next start does not trip on it."""
    state_dir = tmp_path / "state"
    for leftover in state_dir.glob("*"):
        if leftover.is_file():
            leftover.unlink()
    state = StateDir(state_dir)
    (state_dir / EVENTS).write_bytes(data)
    (state_dir / SNAPSHOT).write_bytes(data)
    with caplog.at_level(logging.WARNING):
        events = state.load_events()
        state.read(SNAPSHOT)
    for event in events.items:
        assert isinstance(event["id"], str)
        assert isinstance(event["xid"], int)
    events.active()
    events.add({"id": "new", "xid": 79, "time": 1.0, "gpu_index": 0})
    state.save_events(events)
    assert state.load_events().ids() >= {"new"}
    try:
        json.loads(data)
    except (ValueError, RecursionError):
        assert not (state_dir / SNAPSHOT).exists() or (state_dir / SNAPSHOT).read_bytes() != data
        assert list(state_dir.glob(f"{SNAPSHOT}.corrupt-*"))
