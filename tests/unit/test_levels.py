"""Levels and modes are enums (checks/core/levels.py): the catalog, the runner, the config and
the command line agree on them, and a word that is neither is refused where it enters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterdiag.agent import launch
from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.run.session import run_options
from clusterdiag.agent.settings.config import Config, load_config
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.catalogs.manifest import CHECKS
from clusterdiag.checks.core import index
from clusterdiag.checks.core.levels import LEVEL_NAMES, Level, Mode
from clusterdiag.checks.core.registry import check

CATALOG = {spec.id: spec.schema for spec in REGISTRY.values()}


def test_the_launcher_accepts_the_levels_the_enum_names() -> None:
    assert launch.LEVEL_NAMES == LEVEL_NAMES == ("quick", "full")
    assert launch.slurm_flags(["--level", "full"]) == {"level": "full"}
    assert launch.slurm_flags(["--level", "deep"]) is None  # click says why


def test_a_mode_is_its_word_in_reports_and_in_the_manifest() -> None:
    assert json.dumps({"mode": Mode.PROLOG, "level": Level.FULL}) == \
        '{"mode": "prolog", "level": "full"}'
    assert f"{Mode.AGENT}" == str(Mode.AGENT) == "agent"
    assert REGISTRY["fabric.imex"].skip_in == {Mode.PROLOG}
    assert CHECKS["fabric.imex"]["skip_in"] == ("prolog",)
    assert index.ENTRIES["fabric.imex"].skip_in == {Mode.PROLOG}


def test_rate_and_active_checks_run_at_full_only() -> None:
    assert REGISTRY["ib.error_rate"].levels == (Level.FULL,)
    assert REGISTRY["nccl.allreduce"].levels == (Level.FULL,)
    assert REGISTRY["gpu.count"].levels == (Level.QUICK, Level.FULL)
    assert index.ENTRIES["gpu.count"].levels == REGISTRY["gpu.count"].levels


def test_a_skip_in_typo_fails_the_registration() -> None:
    with pytest.raises(ValueError, match="'prologue' is not a valid Mode"):
        check("test.typo", needs=("host",), remedy="none", skip_in=("prologue",))
    assert "test.typo" not in REGISTRY


def test_run_options_are_enums_from_the_words_given() -> None:
    options = run_options(Config(), "full", None, None, None, mode="epilog")
    assert (options.level, options.mode) == (Level.FULL, Mode.EPILOG)
    assert type(options.level) is Level
    assert type(options.mode) is Mode
    default = run_options(Config(), None, None, None, None)
    assert (default.level, default.mode) == (Level.QUICK, Mode.RUN)


def test_the_config_level_must_be_a_level(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("level: deep\n")
    with pytest.raises(ConfigError, match="key 'level' must be quick or full, got 'deep'"):
        load_config(path, CATALOG)
    path.write_text("level: full\n")
    assert load_config(path, CATALOG).data["level"] == "full"


def test_the_agent_never_runs_an_active_test_and_a_quick_run_no_rate_check() -> None:
    entries, skipped = index.plan(["nccl.allreduce", "ib.error_rate"], None, Level.FULL,
                                  Mode.AGENT)
    assert [e.id for e in entries] == ["ib.error_rate"]
    assert [f.message for f in skipped] == [
        "active test: the agent never loads the GPUs (run it with clusterdiag run)"]
    entries, skipped = index.plan(["ib.error_rate"], None, Level.QUICK, Mode.RUN)
    assert entries == []
    assert "needs two samples" in skipped[0].message
