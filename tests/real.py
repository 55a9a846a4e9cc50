"""Real captures for the tests: those whose licence lets them be copied live in
tests/fixtures/ (each folder's PROVENANCE.md); the others are read from the project's
shared real-data set where it is checked out beside the repository, and a test that needs
one skips, saying which and why, where it is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, SHARED

FIXTURES = REPO / "tests/fixtures"
SHARED_REAL = SHARED / "data/real"


def real_file(fixture_folder: str, shared_folder: str, name: str) -> Path:
    """The capture ``name``: copied under tests/fixtures/``fixture_folder``, else in the
    shared set's ``shared_folder``; a skip naming it when neither has it."""
    for folder in (FIXTURES / fixture_folder, SHARED_REAL / shared_folder):
        if (folder / name).is_file():
            return folder / name
    pytest.skip(f"{name}: not copied into tests/fixtures/{fixture_folder} (its licence does "
                f"not allow it) and the shared real-data set is not at {SHARED_REAL}")


def real_names(fixture_folder: str, shared_folder: str, pattern: str = "*.txt") -> list[str]:
    """Every capture of the folder, copied or shared (the shared set only where present)."""
    found = {p.name for p in (FIXTURES / fixture_folder).glob(pattern)}
    if (SHARED_REAL / shared_folder).is_dir():
        found |= {p.name for p in (SHARED_REAL / shared_folder).glob(pattern)}
    return sorted(found)
