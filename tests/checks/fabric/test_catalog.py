"""The fabric.* catalog's contract (checks/fabric/)."""

from __future__ import annotations

from clusterdiag.checks import REGISTRY
from clusterdiag.checks import fabric as fabric_checks
from clusterdiag.checks.core.finding import Action


def test_catalog_declares_the_contract() -> None:
    ids = sorted(i for i in REGISTRY
                 if REGISTRY[i].func.__module__.startswith(f"{fabric_checks.__name__}."))
    assert ids == ["c2c.error_rate", "c2c.links", "fabric.clique", "fabric.health_mask",
                   "fabric.imex", "fabric.manager", "fabric.state"]
    assert REGISTRY["c2c.error_rate"].rate
    assert not REGISTRY["c2c.links"].rate
    assert REGISTRY["fabric.manager"].params == {"unit": "nvidia-fabricmanager.service"}
    assert REGISTRY["fabric.imex"].params == {"unit": "nvidia-imex.service"}
    assert REGISTRY["fabric.imex"].skip_in == frozenset({"prolog"})
    assert set(REGISTRY["fabric.imex"].actions) <= {Action.FIX_CONFIG, Action.INVESTIGATE}
    assert REGISTRY["fabric.manager"].needs == ("host",)
    assert REGISTRY["fabric.state"].needs == ("nvml",)
