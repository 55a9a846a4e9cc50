"""The prolog's validated copy of a YAML config: used while the file is unchanged, rebuilt
when its bytes change, refused unless root alone could have written it."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.settings.config import load_config
from clusterdiag.agent.settings.config_cache import NAME, RootStore, digest, untrusted
from clusterdiag.checks.core.index import schemas

YAML = "prolog:\n  drain: false\n  scontrol: /usr/bin/scontrol\n"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the cache is root's alone")


def _stat(mode: int, uid: int = 0, nlink: int = 1) -> os.stat_result:
    return os.stat_result((mode, 1, 1, nlink, uid, 0, 10, 0, 0, 0))


@pytest.mark.parametrize(("info", "directory", "problem"), [
    (_stat(stat.S_IFDIR | 0o700), True, None),
    (_stat(stat.S_IFREG | 0o600), False, None),
    (_stat(stat.S_IFDIR | 0o700, uid=999), True, "owned by uid 999, not root"),
    (_stat(stat.S_IFDIR | 0o770), True, "mode 0770, not 0700"),
    (_stat(stat.S_IFDIR | 0o755), True, "mode 0755, not 0700"),
    (_stat(stat.S_IFREG | 0o644), False, "mode 0644, not 0600"),
    (_stat(stat.S_IFREG | 0o600, uid=999), False, "owned by uid 999, not root"),
    (_stat(stat.S_IFREG | 0o600, nlink=2), False, "2 hard links"),
    (_stat(stat.S_IFLNK | 0o777), True, "not a directory"),
    (_stat(stat.S_IFIFO | 0o600), False, "not a regular file"),
])
def test_only_what_root_alone_can_write_is_trusted(info: os.stat_result, directory: bool,
                                                   problem: str | None) -> None:
    assert untrusted(info, directory=directory) == problem


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, RootStore]:
    path = tmp_path / "config.yaml"
    path.write_text(YAML)
    return path, RootStore(str(tmp_path / "cache"))


def _stored(cache: RootStore) -> dict[str, object]:
    data: dict[str, object] = json.loads(Path(cache.directory, NAME).read_text())
    return data


def test_the_copy_is_written_then_used(setup: tuple[Path, RootStore]) -> None:
    path, cache = setup
    first = load_config(path, schemas(), cache)
    assert cache.why is None
    assert _stored(cache)["key"] == digest(path.read_bytes())
    assert stat.S_IMODE(os.lstat(cache.directory).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(Path(cache.directory, NAME)).st_mode) == 0o600
    # What is read next comes from the copy, not the YAML: planted there, it shows.
    stored = _stored(cache)
    stored["document"] = {"prolog": {"drain": True}}
    Path(cache.directory, NAME).write_text(json.dumps(stored))
    again = load_config(path, schemas(), cache)
    assert first.section("prolog")["drain"] is False
    assert again.section("prolog")["drain"] is True
    assert cache.why is None


def test_a_changed_yaml_is_parsed_and_the_copy_rebuilt(
        setup: tuple[Path, RootStore]) -> None:
    path, cache = setup
    load_config(path, schemas(), cache)
    path.write_text(YAML.replace("false", "true"))
    assert load_config(path, schemas(), cache).section("prolog")["drain"] is True
    assert _stored(cache)["key"] == digest(path.read_bytes())


def test_the_copy_is_validated_as_the_yaml_would_be(setup: tuple[Path, RootStore]) -> None:
    path, cache = setup
    load_config(path, schemas(), cache)
    stored = _stored(cache)
    stored["document"] = {"prolog": {"drain": "maybe"}}
    Path(cache.directory, NAME).write_text(json.dumps(stored))
    with pytest.raises(ConfigError, match=r"prolog\.drain"):
        load_config(path, schemas(), cache)


@pytest.mark.parametrize("mode", [0o755, 0o770])
def test_a_directory_others_may_write_is_refused_and_the_yaml_parsed(
        setup: tuple[Path, RootStore], mode: int) -> None:
    path, cache = setup
    load_config(path, schemas(), cache)
    stored = _stored(cache)
    stored["document"] = {"prolog": {"drain": True}}
    Path(cache.directory, NAME).write_text(json.dumps(stored))
    os.chmod(cache.directory, mode)
    assert load_config(path, schemas(), cache).section("prolog")["drain"] is False
    assert cache.why is not None
    assert f"mode {mode:04o}" in cache.why
    assert _stored(cache)["document"] == {"prolog": {"drain": True}}  # not rewritten


def test_a_file_others_may_write_is_refused(setup: tuple[Path, RootStore]) -> None:
    path, cache = setup
    load_config(path, schemas(), cache)
    os.chmod(Path(cache.directory, NAME), 0o666)
    cache.why = None
    assert cache.get(digest(path.read_bytes())) is None
    assert cache.why is not None
    assert "mode 0666" in cache.why


def test_a_file_of_another_owner_is_refused(setup: tuple[Path, RootStore]) -> None:
    path, cache = setup
    load_config(path, schemas(), cache)
    os.chown(Path(cache.directory, NAME), 12345, 12345)
    assert cache.get(digest(path.read_bytes())) is None
    assert cache.why is not None
    assert "uid 12345" in cache.why


def test_a_json_config_is_read_without_a_copy(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"prolog": {"drain": False}}))
    cache = RootStore(str(tmp_path / "cache"))
    load_config(path, schemas(), cache)
    assert not Path(cache.directory).exists()

