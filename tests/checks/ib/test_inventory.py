"""ib.hca_count (checks/ib/inventory.py)."""

from __future__ import annotations

from clusterdiag.checks.core.finding import Status
from tests.checks.ib.factory import eight_hcas, make_dev, make_snap, run, statuses


def test_hca_count() -> None:
    assert statuses(run("ib.hca_count", make_snap(eight_hcas()))) == {Status.PASS}
    short = run("ib.hca_count", make_snap([*eight_hcas()[:7], make_dev("mlx5_bond_0", "storage")]))
    assert statuses(short) == {Status.FAIL}
    assert short[0].observed["count"] == 7
    assert statuses(run("ib.hca_count", make_snap([*eight_hcas(), make_dev("x")]))) == {Status.WARN}
    assert statuses(run("ib.hca_count", make_snap([]), "generic")) == {Status.SKIP}


def test_hca_count_is_an_error_when_an_unreadable_hca_could_make_up_the_count() -> None:
    unreadable = make_dev("mlx5_7", "unknown",
                          role_reason="link_layer: [Errno 13] Permission denied")
    short = run("ib.hca_count", make_snap([*eight_hcas()[:7], unreadable]))
    assert statuses(short) == {Status.ERROR}
    assert "mlx5_7" in short[0].message
    assert "Permission denied" in short[0].message
    # counting the unreadable one as compute still leaves too few: a definite fail
    shorter = run("ib.hca_count", make_snap([*eight_hcas()[:6], unreadable]))
    assert statuses(shorter) == {Status.FAIL}
