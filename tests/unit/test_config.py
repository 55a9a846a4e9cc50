from __future__ import annotations

from pathlib import Path

import pytest

from clusterdiag import checks
from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.settings.config import load_config

CATALOG = {spec.id: spec.schema for spec in checks.REGISTRY.values()}


def _load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path, CATALOG)


def test_missing_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "nope.yaml", CATALOG)


def test_malformed_yaml_gives_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"malformed YAML at line \d+"):
        _load(tmp_path, "budget_s: 3\nchecks: [unclosed: {\nx: 1\n")


def test_unknown_key_suggests_the_close_one(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown key 'budget'.*did you mean 'budget_s'"):
        _load(tmp_path, "budget: 3\n")


def test_unknown_nested_key_is_named_with_its_section(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'prolog\.drian'.*'prolog\.drain'"):
        _load(tmp_path, "prolog:\n  drian: false\n")


def test_wrong_type_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'budget_s' must be a number, got str"):
        _load(tmp_path, "budget_s: soon\n")


def test_bool_is_not_a_number(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="budget_s"):
        _load(tmp_path, "budget_s: true\n")


def test_unknown_check_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"checks\.host\.dsk.*did you mean 'checks\.host\.disk'"):
        _load(tmp_path, "checks:\n  host.dsk: {enabled: false}\n")


def test_check_parameter_types_follow_their_defaults(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"checks\.host\.disk\.min_free_pct' must be a number"):
        _load(tmp_path, "checks:\n  host.disk: {min_free_pct: lots}\n")


def test_precedence_defaults_profile_config(tmp_path: Path) -> None:
    config = _load(tmp_path, "checks:\n  host.disk: {min_free_pct: 12}\n")
    defaults = {"min_free_pct": 5, "paths": ["/"]}
    params = config.check_params("host.disk", defaults, {"min_free_pct": 8, "paths": ["/x"]})
    assert params == {"min_free_pct": 12, "paths": ["/x"]}
    assert config.enabled("host.disk")


def test_disabled_check(tmp_path: Path) -> None:
    config = _load(tmp_path, "checks:\n  host.disk: {enabled: false}\n")
    assert not config.enabled("host.disk")


def test_empty_file_is_defaults(tmp_path: Path) -> None:
    config = _load(tmp_path, "")
    assert config.data["profile"] == "auto"
    assert config.section("prolog")["budget_s"] == 8.0
