"""nccl.library: finding libnccl.so.2 the way a job would, and reading its version from the
REAL library (the nvidia-nccl-cu12 wheel installed in this environment) through ctypes."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import nccl as collector
from clusterdiag.agent.model import Snapshot, SourceStats
from clusterdiag.agent.model.nccl import NcclInfo, NcclLibrary
from clusterdiag.agent.read import sources
from clusterdiag.agent.read.sources import SourceEnv, nccl_versions, python_site_dirs
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.checks.core.finding import Status
from tests.checks.harness import run_check


def _wheel_version() -> str | None:
    try:
        return importlib.metadata.version("nvidia-nccl-cu12")
    except importlib.metadata.PackageNotFoundError:
        return None


WHEEL = _wheel_version()
needs_wheel = pytest.mark.skipif(
    WHEEL is None, reason="the real NCCL library is not installed: pip install -e '.[nccl]' "
    "(the 350 MB nvidia-nccl-cu12 wheel; .ci/run installs it)")


def _wheel_library() -> str:
    for site in python_site_dirs():
        path = os.path.join(site, "nvidia/nccl/lib/libnccl.so.2")
        if os.path.isfile(path):
            return path
    pytest.fail("nvidia-nccl-cu12 is installed but its libnccl.so.2 was not found")


def _collect(env: SourceEnv) -> NcclInfo:
    return collector.collect(env, SourceStats(), time.monotonic() + 20)


def _judge(info: NcclInfo, **params: object) -> list:
    snap = Snapshot(node="n", taken_at=0.0, nccl=info)
    return run_check("nccl.library", snap, profile="dgx-h100", params=params)


@pytest.mark.parametrize(("code", "text"), [(2804, "2.8.4"), (22105, "2.21.5"),
                                            (23203, "2.32.3"), (23007, "2.30.7")])
def test_version_code_encodings(code: int, text: str) -> None:
    assert collector.version_string(code) == text


@needs_wheel
def test_real_wheel_library_version_matches_its_metadata() -> None:
    path = _wheel_library()
    code, error = nccl_versions([path], 30)[path]
    assert error is None
    assert collector.version_string(code or 0) == WHEEL


@needs_wheel
def test_collector_finds_the_wheel_of_the_active_python() -> None:
    env = SourceEnv(environ={"PATH": os.environ.get("PATH", "")}, find_library=lambda n: None)
    info = _collect(env)
    wheel = [lib for lib in info.libraries if lib.found_by == "python wheel"]
    assert wheel, info.libraries
    assert wheel[0].version == WHEEL
    assert wheel[0].path.startswith(sys.prefix)


@needs_wheel
def test_ld_library_path_wins_over_the_wheel(tmp_path: Path) -> None:
    (tmp_path / "libnccl.so.2").symlink_to(_wheel_library())
    env = SourceEnv(environ={"LD_LIBRARY_PATH": f"{tmp_path}:"}, find_library=lambda n: None)
    info = _collect(env)
    assert info.libraries[0].found_by == "LD_LIBRARY_PATH"
    assert info.library_path == str(tmp_path / "libnccl.so.2")
    assert info.version == WHEEL
    # the same file is not listed twice under the wheel's name
    assert [lib.found_by for lib in info.libraries].count("python wheel") == 0


def test_a_file_that_is_not_a_library_gives_its_reason(tmp_path: Path) -> None:
    fake = tmp_path / "libnccl.so.2"
    fake.write_text("not an ELF file")
    answer = nccl_versions([str(fake)], 30)[str(fake)]
    assert answer[0] is None
    assert answer[1]


def test_loading_is_bounded_by_its_timeout(tmp_path: Path) -> None:
    path = str(tmp_path / "libnccl.so.2")
    started = time.monotonic()
    answer = nccl_versions([path], 0.001)[path]
    assert time.monotonic() - started < 20  # a guard: the load itself is not waited for
    assert answer[0] is None
    assert "longer than" in (answer[1] or "")


@needs_wheel
def test_captured_root_uses_its_linker_dirs_and_not_this_python(tmp_path: Path) -> None:
    (tmp_path / "etc/ld.so.conf.d").mkdir(parents=True)
    (tmp_path / "etc/ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    (tmp_path / "etc/ld.so.conf.d/cuda.conf").write_text("/opt/nccl/lib\n")
    (tmp_path / "opt/nccl/lib").mkdir(parents=True)
    (tmp_path / "opt/nccl/lib/libnccl.so.2").symlink_to(_wheel_library())
    loaded: list[str] = []

    def fake_versions(paths: list[str], timeout_s: float) -> dict:
        loaded.extend(paths)
        return {p: (22105, None) for p in paths}

    env = SourceEnv(root=tmp_path, environ={}, nccl_versions=fake_versions)
    info = _collect(env)
    assert [lib.path for lib in info.libraries] == ["/opt/nccl/lib/libnccl.so.2"]
    assert loaded == [str(tmp_path / "opt/nccl/lib/libnccl.so.2")]
    assert info.version == "2.21.5"


def test_simulated_node_answers_from_its_own_state() -> None:
    info = _collect(env_for(NodeSpec("n1", "dgx-h100")))
    assert info.libraries[0].path == "/usr/lib/x86_64-linux-gnu/libnccl.so.2"
    assert info.version == "2.23.4"
    missing = _collect(env_for(NodeSpec("n1", "dgx-h100",
                                        faults=[{"node": "n1", "kind": "nccl_missing"}])))
    assert missing.libraries == []
    assert missing.version is None


def test_missing_library_is_skip_unless_required() -> None:
    (finding,) = _judge(NcclInfo())
    assert finding.status is Status.SKIP
    (finding,) = _judge(NcclInfo(), require_host=True)
    assert finding.status is Status.FAIL
    assert finding.action.value == "fix_config"


def test_found_library_passes_and_min_version_fails_an_old_one() -> None:
    info = NcclInfo(libraries=[NcclLibrary("/usr/lib/libnccl.so.2", "linker path", "2.18.3")])
    (finding,) = _judge(info)
    assert finding.status is Status.PASS
    assert "2.18.3" in finding.message
    (finding,) = _judge(info, min_version="2.21")
    assert finding.status is Status.FAIL


def test_unloadable_library_warns_or_fails_when_required() -> None:
    info = NcclInfo(libraries=[NcclLibrary("/x/libnccl.so.2", "linker path", None, "bad ELF")])
    assert _judge(info)[0].status is Status.WARN
    assert _judge(info, require_host=True)[0].status is Status.FAIL


@needs_wheel
def test_a_version_is_probed_once_until_the_library_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    library = tmp_path / "libnccl.so.2"
    shutil.copy(_wheel_library(), library)
    probes: list[list[str]] = []
    real_probe = sources._probe_versions

    def counting(paths: list[str], timeout_s: float) -> sources.NcclVersions:
        probes.append(paths)
        return real_probe(paths, timeout_s)

    monkeypatch.setattr(sources, "_probe_versions", counting)
    first = nccl_versions([str(library)], 30)
    assert nccl_versions([str(library)], 30) == first
    assert len(probes) == 1
    assert first[str(library)][0] is not None
    with library.open("ab") as handle:  # the file changed (an upgrade in place)
        handle.write(b"\0")
    nccl_versions([str(library)], 30)
    assert len(probes) == 2


def test_a_failed_probe_is_retried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bogus = tmp_path / "libnccl.so.2"
    bogus.write_bytes(b"\x7fELF but no library")
    probes: list[list[str]] = []
    real_probe = sources._probe_versions
    monkeypatch.setattr(sources, "_probe_versions",
                        lambda paths, t: probes.append(paths) or real_probe(paths, t))
    for _ in range(2):
        code, error = nccl_versions([str(bogus)], 30)[str(bogus)]
        assert code is None
        assert error
    assert len(probes) == 2


def test_find_library_runs_once_until_the_linker_cache_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import ctypes.util

    cache = tmp_path / "ld.so.cache"
    cache.write_bytes(b"cache v1")
    calls: list[str] = []
    monkeypatch.setattr(sources, "_LD_CACHE", str(cache))
    monkeypatch.setattr(sources, "_libraries", {})
    monkeypatch.setattr(ctypes.util, "find_library",
                        lambda name: calls.append(name) or "libnccl.so.2")
    assert sources.find_library("nccl") == sources.find_library("nccl") == "libnccl.so.2"
    assert calls == ["nccl"]
    cache.write_bytes(b"cache v2, rebuilt by ldconfig")
    sources.find_library("nccl")
    assert calls == ["nccl", "nccl"]
