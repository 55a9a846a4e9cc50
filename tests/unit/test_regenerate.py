"""``python -m dev.regenerate``: it names what is stale, writes it, and then nothing is."""

from __future__ import annotations

from pathlib import Path

import pytest

from dev import regenerate


def test_check_names_the_stale_files_and_regenerate_writes_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fresh, stale, missing = tmp_path / "fresh.md", tmp_path / "stale.md", tmp_path / "new.md"
    fresh.write_text("same\n")
    stale.write_text("edited by hand\n")
    wanted = {fresh: "same\n", stale: "generated\n", missing: "also generated\n"}
    monkeypatch.setattr(regenerate, "REPO", tmp_path)
    monkeypatch.setattr(regenerate, "MAKERS", (("test", lambda: wanted),))
    assert regenerate.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "stale: stale.md" in out
    assert "stale: new.md" in out
    assert "fresh.md" not in out
    assert stale.read_text() == "edited by hand\n", "--check writes nothing"
    assert regenerate.main([]) == 0
    assert {p.name: p.read_text() for p in wanted} == {p.name: t for p, t in wanted.items()}
    assert regenerate.main(["--check"]) == 0


def test_an_unknown_argument_is_a_usage_error() -> None:
    assert regenerate.main(["--write"]) == 2

