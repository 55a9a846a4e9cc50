"""The majority of a fleet's captures (agent/capture/majority.py): ties are left to the
base, a node that could not read a value deviates as 'not read'."""

from __future__ import annotations

from clusterdiag.agent.capture.majority import majority
from clusterdiag.agent.capture.profile import Capture


def _cap(**values: object) -> Capture:
    cap = Capture(extends="hgx-h100-8gpu")
    for key, value in values.items():
        cap.set(key, value, f"read {key}")
    return cap


def test_a_tie_is_inherited_and_a_missing_value_deviates() -> None:
    captures = [("a", _cap(gpu_count=8, nvlinks_per_gpu=18)),
                ("b", _cap(gpu_count=8, nvlinks_per_gpu=12)),
                ("c", _cap(gpu_count=8)),
                ("d", _cap(nvlinks_per_gpu=18))]
    merged, deviations = majority(captures, "hgx-h100-8gpu")
    assert merged.values == {"gpu_count": 8}
    assert merged.comments["gpu_count"] == "read gpu_count; 3 of 4 snapshots"
    assert any(n.startswith("nvlinks_per_gpu: no majority") for n in merged.notes)
    assert [d.line() for d in deviations] == [
        "d: gpu_count not read, the majority 8 (3 of 4 snapshots)"]


def test_notes_most_nodes_carry_are_kept_and_lists_compare_whole() -> None:
    caps = [_cap(gpu_nic_distance=["PIX"]) for _ in range(3)]
    for cap in caps[:2]:
        cap.notes.append("driver seen: 570.86.15")
    caps[2].notes.append("driver seen: 550.54.15")
    merged, deviations = majority([("a", caps[0]), ("b", caps[1]), ("c", caps[2])], "x")
    assert merged.notes == ["driver seen: 570.86.15"]
    assert merged.values == {"gpu_nic_distance": ["PIX"]}
    assert deviations == []
