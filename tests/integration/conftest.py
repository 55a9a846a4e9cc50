"""Fixtures the integration tests share across modules."""

from __future__ import annotations

import pytest

from tests.integration.bundles import Shelf


@pytest.fixture(scope="session")
def bundle_shelf(tmp_path_factory: pytest.TempPathFactory) -> Shelf:
    """The checkout's bundles, each built once per session (tests/integration/bundles.py);
    only the ``wheel`` xdist group asks, so one worker builds them."""
    return Shelf(tmp_path_factory.mktemp("bundles"))
