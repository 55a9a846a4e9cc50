"""srun's MPI plugin for the jobs between nodes: taken from what this Slurm lists, never
assumed (a Slurm built without PMIx fails every ``--mpi=pmix`` job)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from clusterdiag.agent.qualify.launch import choose_mpi, group_runner, mpi_plugins, srun_mpi

REAL = Path(__file__).parents[1] / "fixtures" / "real" / "slurm" / "srun-mpi-list.txt"


def test_the_real_listing_is_read() -> None:
    assert mpi_plugins(REAL.read_text()) == ["pmix", "none", "cray_shasta", "pmi2"]
    assert choose_mpi(mpi_plugins(REAL.read_text())) == "pmix"


def test_a_slurm_without_pmix_uses_pmi2_and_one_with_neither_has_none() -> None:
    assert choose_mpi(["cray_shasta", "none", "pmi2"]) == "pmi2"
    assert choose_mpi(["none", "cray_shasta"]) is None


def _fake_srun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listing: str,
               code: int = 0) -> Path:
    log = tmp_path / "argv.log"
    srun = tmp_path / "srun"
    srun.write_text("#!/bin/sh\n"
                    f"echo \"$*\" >> {log}\n"
                    "if [ \"$1\" = --mpi=list ]; then\n"
                    f"  printf '{listing}'\n  exit {code}\nfi\n"
                    "echo 'srun: error: the job step'\n"
                    "exit 1\n")
    srun.chmod(srun.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return log


def test_auto_asks_srun_once_and_uses_what_it_lists(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    log = _fake_srun(tmp_path, monkeypatch, "MPI plugin types are...\\n\\tnone\\n\\tpmi2\\n")
    run = group_runner("srun", "auto")
    for _ in range(2):
        result = run(["n1", "n2"], ["all_reduce_perf"], {}, 10)
        assert result.returncode == 1
        assert "the job step" in result.stdout  # the launcher's own words come back
    calls = log.read_text().splitlines()
    assert calls.count("--mpi=list") == 1
    assert all("--mpi=pmi2" in c for c in calls if c != "--mpi=list")


def test_no_usable_plugin_is_an_error_naming_the_setting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_srun(tmp_path, monkeypatch, "MPI plugin types are...\\n\\tnone\\n\\tcray_shasta\\n")
    plugin, why = srun_mpi("auto")
    assert plugin is None
    assert why is not None
    assert "cray_shasta" in why
    assert "qualify.srun_mpi" in why
    result = group_runner("srun", "auto")(["n1", "n2"], ["all_reduce_perf"], {}, 10)
    assert result.error == why


def test_a_configured_plugin_is_used_as_given(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    log = _fake_srun(tmp_path, monkeypatch, "")
    group_runner("srun", "pmi2")(["n1", "n2"], ["all_reduce_perf"], {}, 10)
    assert "--mpi=list" not in log.read_text().splitlines()
    assert "--mpi=pmi2" in log.read_text()
