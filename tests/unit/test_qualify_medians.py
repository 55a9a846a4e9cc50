"""The fleet's medians file (agent/qualify/medians.py): what a run records, how a run over
one part of the fleet merges into it, how it is read back (bounded, every field checked,
one line for a file that is not one), which entries are recent; and the straggler rule
held against those medians (checks/qualify/judge.py ``grade``)."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.model.qualify import Figure
from clusterdiag.agent.qualify import medians
from clusterdiag.agent.qualify.medians import MAX_BYTES, MAX_ENTRIES, Median, MediansError
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.qualify.judge import Judged, StragglerRule, grade

T0 = 1_800_000_000.0
DAY = 86_400.0


def _judged(node: str, gpu: int, value: float, profile: str = "dgx-h100") -> Judged:
    return Judged(Figure(node, "gpu_compute", f"gpu{gpu}", [value], "Gflop/s", "gpu_burn"),
                  profile)


def _median(profile: str = "dgx-h100", test: str = "gpu_compute", value: float = 50000.0,
            at: float = T0) -> Median:
    return Median(profile, test, "gpu", "gpu_burn", value, "Gflop/s", 24, 3, at)


def test_a_run_records_the_median_of_each_group_spanning_enough_nodes() -> None:
    judged = [_judged(f"n{n}", g, 1000.0 + 10 * n + g) for n in range(3) for g in range(8)]
    judged += [_judged("a1", g, 5.0, "dgx-a100") for g in range(8)]  # one node: no fleet
    (got,) = medians.from_run(judged, 3, T0)
    assert got == Median("dgx-h100", "gpu_compute", "gpu", "gpu_burn", 1013.5, "Gflop/s",
                         24, 3, T0)
    assert medians.from_run(judged, 4, T0) == []


def test_the_file_round_trips_and_a_later_run_replaces_only_its_own_groups(
        tmp_path: Path) -> None:
    path = tmp_path / "medians.json"
    medians.write(path, medians.merge({}, [_median("dgx-a100"), _median("dgx-h100")]))
    newer = _median("dgx-h100", value=40000.0, at=T0 + DAY)
    medians.write(path, medians.merge(medians.read(path), [newer]))
    assert sorted(medians.read(path).values(), key=lambda m: m.profile) == [
        _median("dgx-a100"), newer]
    assert not [p for p in os.listdir(tmp_path) if p != "medians.json"]  # no temp left


def test_a_merge_keeps_the_newest_entries_within_the_bound() -> None:
    old = {m.key: m for m in (_median(test=f"t{n}", at=T0 + n) for n in range(MAX_ENTRIES))}
    merged = medians.merge(old, [_median(test="new", at=T0 + MAX_ENTRIES)])
    assert len(merged) == MAX_ENTRIES
    assert {m.test for m in merged} == {"new"} | {f"t{n}" for n in range(1, MAX_ENTRIES)}


def _entry(**changed: Any) -> dict[str, Any]:
    return {"profile": "dgx-h100", "test": "gpu_compute", "kind": "gpu", "tool": "gpu_burn",
            "median": 50000.0, "unit": "Gflop/s", "figures": 24, "nodes": 3, "at": T0,
            **changed}


def _file(*entries: Any, schema: str = medians.SCHEMA) -> bytes:
    return json.dumps({"schema": schema, "medians": list(entries)}).encode()


@pytest.mark.parametrize(("body", "why"), [
    (_file(_entry(median=math.nan)), "median NaN is not a positive number"),
    (_file(_entry(median=-3.0)), "median -3.0 is not a positive number"),
    (_file(_entry(median=0)), "median 0 is not a positive number"),
    (_file(_entry(median="50000")), 'median "50000" is not a positive number'),
    (_file(_entry(median=True)), "median true is not a positive number"),
    (_file(_entry(at=math.inf)), "at Infinity is not a time"),
    (_file(_entry(at=-1)), "at -1 is not a time"),
    (_file(_entry(figures=0)), "figures and nodes must be counts"),
    (_file(_entry(nodes=2.5)), "figures and nodes must be counts"),
    (_file(_entry(profile="x" * 65)), "a name that is not a short printable string"),
    (_file(_entry(test="gpu\x1b[2J")), "a name that is not a short printable string"),
    (_file(_entry(unit=None)), "a name that is not a short printable string"),
    (_file(_entry(), "not an entry"), "median #1: not an object"),
    (_file(_entry(), schema="clusterdiag/qualify-baseline/v1"),
     "not a clusterdiag/qualify-medians/v1 file"),
    (b'{"schema": "clusterdiag/qualify-medians/v1", "medians": {}}', "no list of medians"),
    (_file(*[_entry()] * (MAX_ENTRIES + 1)), f"more than {MAX_ENTRIES}"),
    (b"[" * 100_000, "maximum recursion depth"),
    (b"{garbage", "Expecting property name"),
    (b" " * (MAX_BYTES + 1), f"larger than {MAX_BYTES} bytes"),
])
def test_a_file_that_is_not_a_medians_file_is_refused_in_one_line(
        tmp_path: Path, body: bytes, why: str) -> None:
    path = tmp_path / "medians.json"
    path.write_bytes(body)
    with pytest.raises(MediansError) as caught:
        medians.read(path)
    said = str(caught.value)
    assert said.startswith(f"{path}: ")
    assert why in said
    assert "\n" not in said
    assert len(said) < 400


def test_a_link_or_a_fifo_is_never_followed_or_waited_on(tmp_path: Path) -> None:
    target = tmp_path / "real.json"
    target.write_bytes(_file(_entry()))
    (tmp_path / "link.json").symlink_to(target)
    os.mkfifo(tmp_path / "fifo.json")
    with pytest.raises(MediansError, match="a symbolic link"):
        medians.read(tmp_path / "link.json")
    with pytest.raises(MediansError, match="a FIFO"):
        medians.read(tmp_path / "fifo.json")


def test_only_recent_entries_of_the_profiles_tests_are_used() -> None:
    saved = {m.key: m for m in (_median(), _median("dgx-a100"), _median(test="hbm"))}
    fresh, stale = medians.recent(saved, "dgx-h100", ("gpu_compute",), T0 + 29 * DAY,
                                  30 * DAY)
    assert (fresh, stale) == ({_median().key: 50000.0}, [])
    fresh, stale = medians.recent(saved, "dgx-h100", ("gpu_compute",), T0 + 31 * DAY,
                                  30 * DAY)
    assert (fresh, stale) == ({}, [_median()])
    # A time later than the clock allows is no run's: not used either.
    fresh, stale = medians.recent(saved, "dgx-h100", ("gpu_compute",), T0 - DAY, 30 * DAY)
    assert (fresh, stale) == ({}, [_median()])


def test_a_node_slow_as_a_whole_fails_only_against_the_fleets_median() -> None:
    figures = [Figure("n1", "gpu_compute", f"gpu{g}", [35000.0 + g, 35100.0], "Gflop/s",
                      "gpu_burn") for g in range(8)]
    rule = StragglerRule()
    alone = grade(figures, {"n1": "dgx-h100"}, {}, rule)
    assert {j.status for j in alone} == {Status.PASS}
    key = ("dgx-h100", "gpu_compute", "gpu", "gpu_burn")
    judged = grade(figures, {"n1": "dgx-h100"}, {}, rule, {key: 50000.0})
    assert {(j.status, j.why, j.fleet_median) for j in judged} == {
        (Status.FAIL, "more than 10 % below the fleet's median", 50000.0)}
    near = grade(figures, {"n1": "dgx-h100"}, {}, rule, {key: 37500.0})  # 6.7 % below
    assert {(j.status, j.why) for j in near} == {
        (Status.WARN, "more than 5 % below the fleet's median")}
