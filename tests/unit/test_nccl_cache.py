"""The NCCL version cache kept in the state directory (agent/run/nccl_cache.py): a run after
the first loads no library while the file is unchanged, probes again once it changes, and
takes nothing from a cache file that is not one it wrote.

Each "run" starts with an empty in-process memory, as a new prolog does; the probe (a
child interpreter loading the library) is counted, and answers as a real libnccl would.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clusterdiag.agent.read import sources
from clusterdiag.agent.run import nccl_cache
from clusterdiag.agent.run.nccl_cache import PersistedVersions

CODE = 22105  # 2.21.5


@pytest.fixture
def probes(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Every probe a run starts; each answers CODE for every library."""
    started: list[list[str]] = []

    def probe(paths: list[str], timeout_s: float) -> sources.NcclVersions:
        started.append(paths)
        return {path: (CODE, None) for path in paths}

    monkeypatch.setattr(sources, "_probe_versions", probe)
    return started


def _library(tmp_path: Path) -> str:
    path = tmp_path / "lib" / "libnccl.so.2"
    path.parent.mkdir()
    path.write_bytes(b"\x7fELF" + b"\0" * 60)
    return str(path)


def _run(state: Path, library: str, monkeypatch: pytest.MonkeyPatch) -> sources.NcclVersions:
    """One run of a fresh process: nothing remembered in memory."""
    monkeypatch.setattr(sources, "_versions", {})
    return PersistedVersions(state / nccl_cache.NAME)([library], 30)


def test_a_later_run_loads_no_library_while_the_file_is_unchanged(
        tmp_path: Path, probes: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    library = _library(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    assert _run(state, library, monkeypatch) == {library: (CODE, None)}
    assert _run(state, library, monkeypatch) == {library: (CODE, None)}
    assert len(probes) == 1
    stored = json.loads((state / nccl_cache.NAME).read_text())["libraries"][library]
    info = os.stat(library)
    assert (stored["inode"], stored["size"], stored["mtime_ns"]) == (
        info.st_ino, info.st_size, info.st_mtime_ns)


def test_a_changed_library_is_probed_again_and_the_cache_updated(
        tmp_path: Path, probes: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    library = _library(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    _run(state, library, monkeypatch)
    with open(library, "ab") as handle:  # upgraded in place
        handle.write(b"\0")
    _run(state, library, monkeypatch)
    assert len(probes) == 2
    stored = json.loads((state / nccl_cache.NAME).read_text())["libraries"][library]
    assert stored["size"] == os.stat(library).st_size
    _run(state, library, monkeypatch)
    assert len(probes) == 2


@pytest.mark.parametrize("body", [
    b"not json",
    b"[]",
    b'{"libraries": {"relative/libnccl.so.2": {"inode": 1, "size": 1, "mtime_ns": 1, '
    b'"code": 1}}}',
    b'{"libraries": {"LIB": {"inode": "1", "size": 1, "mtime_ns": 1, "code": 1}}}',
    b'{"libraries": {"LIB": {"inode": 1, "size": 1, "mtime_ns": 1, "code": true}}}',
    b'{"libraries": {"LIB": {"inode": 1, "size": 1, "mtime_ns": 1}}}',
    b'{"libraries": {"LIB": {"inode": 1, "size": 1, "mtime_ns": 1, "code": 1, "x": 0}}}',
])
def test_a_malformed_cache_is_ignored(tmp_path: Path, body: bytes,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    library = _library(tmp_path)
    assert nccl_cache.parse(body.replace(b"LIB", library.encode())) is None


def test_a_planted_out_of_range_entry_is_not_trusted(
        tmp_path: Path, probes: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry for this very file (its key right) but with a code no NCCL has: the
    whole file is ignored, the library probed, and the cache rewritten from the probe."""
    library = _library(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    info = os.stat(library)
    (state / nccl_cache.NAME).write_text(json.dumps({"libraries": {library: {
        "inode": info.st_ino, "size": info.st_size, "mtime_ns": info.st_mtime_ns,
        "code": 10**12}}}))
    assert _run(state, library, monkeypatch) == {library: (CODE, None)}
    assert len(probes) == 1
    assert json.loads((state / nccl_cache.NAME).read_text())["libraries"][library][
        "code"] == CODE


def test_a_cache_reached_through_a_link_is_not_read(
        tmp_path: Path, probes: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    library = _library(tmp_path)
    info = os.stat(library)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"libraries": {library: {
        "inode": info.st_ino, "size": info.st_size, "mtime_ns": info.st_mtime_ns,
        "code": 2804}}}))
    state = tmp_path / "state"
    state.mkdir()
    (state / nccl_cache.NAME).symlink_to(elsewhere)
    assert _run(state, library, monkeypatch) == {library: (CODE, None)}
    assert len(probes) == 1


def test_a_failed_probe_is_not_stored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = _library(tmp_path)
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setattr(sources, "_probe_versions",
                        lambda paths, t: {p: (None, "undefined symbol") for p in paths})
    assert _run(state, library, monkeypatch) == {library: (None, "undefined symbol")}
    assert not (state / nccl_cache.NAME).exists()


def test_without_a_state_directory_the_run_still_answers(
        tmp_path: Path, probes: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    library = _library(tmp_path)
    assert _run(tmp_path / "no-state", library, monkeypatch) == {library: (CODE, None)}
    assert not (tmp_path / "no-state").exists()


def test_a_file_that_is_not_elf_is_answered_without_a_probe(
        tmp_path: Path, probes: list[list[str]]) -> None:
    stub = tmp_path / "libnccl.so.2"
    stub.write_text("INPUT(libnccl.so.2.21.5)\n")  # a linker script, not a library
    code, error = sources.nccl_versions([str(stub)], 30)[str(stub)]
    assert code is None
    assert "not an ELF" in (error or "")
    assert probes == []
