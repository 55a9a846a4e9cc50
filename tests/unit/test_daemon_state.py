"""Agent state: atomic files, corrupt files set aside, events kept and cleared."""

from __future__ import annotations

import errno
import json
import logging
import os
import time
from pathlib import Path

import pytest

from clusterdiag.agent.base.errors import CollectError, UsageError
from clusterdiag.agent.daemon import state as state_module
from clusterdiag.agent.daemon.main import clear
from clusterdiag.agent.daemon.state import (
    ID_RE,
    MAX_EVENTS,
    Events,
    StateDir,
    write_json_atomic,
)


def _event(n: int, cleared: bool = False) -> dict[str, object]:
    return {"id": f"xid79-gpu0-{n}", "xid": 79, "gpu_index": 0, "gpu_uuid": None,
            "time": float(n), "cleared": {"why": "x", "at": 1.0} if cleared else None}


def test_atomic_write_replaces_whole_and_leaves_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"b": 2})
    assert json.loads(target.read_text()) == {"b": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]
    assert not target.stat().st_mode & 0o007  # not for every user


def test_state_dir_created_and_unusable_one_is_exit_3(tmp_path: Path) -> None:
    StateDir(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b" / "clear").is_dir()
    (tmp_path / "f").write_text("")
    with pytest.raises(CollectError, match="state directory"):
        StateDir(tmp_path / "f" / "state")


def test_corrupt_events_file_is_set_aside_and_logged(tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    state = StateDir(tmp_path)
    (tmp_path / "events.json").write_text('{"version": 1, "events": [')
    with caplog.at_level(logging.WARNING):
        events = state.load_events()
    assert events.items == []
    assert any(r.getMessage() == "state_corrupt" for r in caplog.records)
    assert not (tmp_path / "events.json").exists()
    assert list(tmp_path.glob("events.json.corrupt-*"))


def test_malformed_entries_are_dropped_good_ones_kept(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    write_json_atomic(tmp_path / "events.json",
                      {"version": 1, "events": [_event(1), {"id": 3}, "junk"]})
    assert [e["id"] for e in state.load_events().items] == ["xid79-gpu0-1"]


def test_events_dedupe_clear_and_cap() -> None:
    events = Events()
    assert events.add(_event(1))
    assert not events.add(_event(1))
    assert events.clear("nope", "x") == []
    assert events.clear("xid79-gpu0-1", "reset seen") == ["xid79-gpu0-1"]
    assert events.active() == []
    for n in range(2, MAX_EVENTS + 2):
        events.add(_event(n))
    assert len(events.items) == MAX_EVENTS
    assert "xid79-gpu0-1" not in events.ids()  # the cleared one went first


def test_clear_requests_round_trip(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    state.request_clear("xid79-gpu0-5")
    (tmp_path / "clear" / "bad name!").write_text("")
    assert state.take_clear_requests() == ["xid79-gpu0-5"]
    state.done_clear_request("xid79-gpu0-5")
    assert state.take_clear_requests() == []


def _listings(state: StateDir, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the agent's listings of ``clear/`` (one entry per listing)."""
    calls: list[int] = []
    real = state._list_clear_requests

    def counted() -> list[str] | None:
        calls.append(1)
        return real()

    monkeypatch.setattr(state, "_list_clear_requests", counted)
    return calls


def _clock(monkeypatch: pytest.MonkeyPatch, ahead_s: float) -> None:
    now = time.time_ns() + int(ahead_s * 1e9)
    monkeypatch.setattr(state_module.time, "time_ns", lambda: now)


def test_clear_dir_is_listed_again_only_once_it_changed(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    state = StateDir(tmp_path)
    listings = _listings(state, monkeypatch)
    _clock(monkeypatch, 10)  # clear/ settled long ago
    assert state.take_clear_requests() == []
    assert state.take_clear_requests() == []
    assert len(listings) == 1  # the second look was its lstat alone
    state.request_clear("xid79-gpu0-5")
    _clock(monkeypatch, 10)
    assert state.take_clear_requests() == ["xid79-gpu0-5"]
    assert state.take_clear_requests() == ["xid79-gpu0-5"]  # still there: listed again
    state.done_clear_request("xid79-gpu0-5")
    _clock(monkeypatch, 10)
    assert state.take_clear_requests() == []
    (tmp_path / "clear" / "bad name!").write_text("")  # refused: logged once, not each second
    _clock(monkeypatch, 10)
    assert state.take_clear_requests() == []
    assert state.take_clear_requests() == []
    assert len(listings) == 5


def test_clear_dir_changed_within_the_clock_tick_is_listed_every_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A request made in the same tick of the kernel's clock as the last listing may leave
    the directory's times as they were: until they are older than the settling time the
    directory is listed at every look, so such a request is taken at the next one."""
    state = StateDir(tmp_path)
    listings = _listings(state, monkeypatch)
    _clock(monkeypatch, 0.5)  # clear/ made half a second ago, unchanged since
    assert state.take_clear_requests() == []
    assert state.take_clear_requests() == []
    assert len(listings) == 2


def test_clear_dir_unlistable_is_listed_again_at_the_next_look(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing that failed (out of descriptors, say) says nothing about what is there:
    the next look lists again although ``clear/`` did not change."""
    state = StateDir(tmp_path)
    _clock(monkeypatch, 10)
    state.request_clear("xid79-gpu0-5")
    _clock(monkeypatch, 10)
    real = os.listdir
    failing = [True]

    def listdir(path: object) -> list[str]:
        if failing.pop(0) if failing else False:
            raise OSError(errno.EMFILE, "Too many open files")
        return real(path)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(state_module.os, "listdir", listdir)
    assert state.take_clear_requests() == []
    assert state.take_clear_requests() == ["xid79-gpu0-5"]


def test_sweep_removes_killed_writers_temp_files(tmp_path: Path) -> None:
    state = StateDir(tmp_path)
    (tmp_path / ".tmp-report.json.123").write_text("{")
    state.sweep()
    assert not list(tmp_path.glob(".tmp-*"))


@pytest.mark.parametrize("name", [".", "..", "...", "", "a/b", "x" * 81])
def test_id_pattern_refuses_names_that_are_not_plain_files(name: str) -> None:
    assert not ID_RE.match(name)


@pytest.mark.parametrize("name", ["xid79-gpu0-1", "all", ".x", "a.b", "x" * 80])
def test_id_pattern_accepts_event_ids(name: str) -> None:
    assert ID_RE.match(name)


@pytest.mark.parametrize("name", [".", ".."])
def test_clear_refuses_dot_ids_before_touching_state(tmp_path: Path, name: str) -> None:
    with pytest.raises(UsageError, match="not an event id"):
        clear(None, tmp_path, name)
