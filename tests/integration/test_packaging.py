"""The wheel carries the data files the code loads at run time, under the namespace."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO

# Shares the wheel build with the bundle tests, one at a time on one worker.
pytestmark = pytest.mark.xdist_group("wheel")


def _builder() -> ModuleType:
    """The bundle builder (deploy/bundle/build.py, a script outside the package): the
    wheel tested here is the one every bundle ships."""
    spec = importlib.util.spec_from_file_location("bundle_build", REPO / "deploy/bundle/build.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_wheel_contains_profiles_schema_and_no_generic_top_level(tmp_path: Path) -> None:
    wheel = _builder().project_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    for profile in ("dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72",
                    "gb300-nvl72", "hgx-h100-pcie", "generic"):
        assert f"clusterdiag/checks/profiles/{profile}.yaml" in names
    assert "clusterdiag/reports/schema/node-report.v1.json" in names
    assert "clusterdiag/reports/schema/qualify-report.v1.json" in names
    assert "clusterdiag/checks/catalogs/xid_catalog.tsv" in names
    # every module of the tree ships: a package missing from pyproject's list works in an
    # editable install and breaks only the installed form
    for folder in ("agent", "checks", "reports"):
        for module in (REPO / folder).rglob("*.py"):
            assert f"clusterdiag/{module.relative_to(REPO).as_posix()}" in names, module
    assert "clusterdiag/agent/sim/writers/nvml.py" in names
    top = {n.split("/")[0] for n in names}
    assert top <= {"clusterdiag", *(n.split("/")[0] for n in names if ".dist-info" in n)}
    assert not any(n.startswith(("checks/", "agent/", "reports/")) for n in names)
