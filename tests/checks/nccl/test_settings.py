"""The NCCL_* settings rules themselves: name lists, HCA and port syntax, GDR levels
(checks/nccl/settings.py)."""

from __future__ import annotations

import pytest

from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.nccl.settings import check_ib_hca, gdr_level, parse_list
from tests.checks.nccl.factory import PORTS


@pytest.mark.parametrize(("value", "exclude", "exact", "tokens"), [
    ("mlx5_0,mlx5_1", False, False, ("mlx5_0", "mlx5_1")),
    ("^=mlx5_1 , mlx5_2", True, True, ("mlx5_1", "mlx5_2")),
    ("=mlx5_0:1", False, True, ("mlx5_0:1",)),
])
def test_parse_list(value: str, exclude: bool, exact: bool, tokens: tuple) -> None:
    parsed = parse_list(value)
    assert (parsed.exclude, parsed.exact, parsed.tokens) == (exclude, exact, tokens)


def test_prefix_matching_is_called_out() -> None:
    findings = list(check_ib_hca("mlx5_1", PORTS))
    (warn,) = findings
    assert warn.status is Status.WARN
    assert "prefix" in warn.message
    assert warn.observed == {"mlx5_1": ["mlx5_10", "mlx5_11"]}
    assert warn.expected == "=mlx5_1"
    assert not list(check_ib_hca("=mlx5_1", PORTS))


def test_hca_that_does_not_exist_fails_and_a_down_port_warns() -> None:
    (fail,) = list(check_ib_hca("=mlx5_0,mlx5_99", PORTS))
    assert fail.status is Status.FAIL
    assert fail.observed == "mlx5_99"
    (warn,) = list(check_ib_hca("=mlx5_0,mlx5_6", PORTS))
    assert warn.status is Status.WARN
    assert warn.observed == ["mlx5_6/1"]
    statuses = [f.status for f in check_ib_hca("=mlx5_6", PORTS)]
    assert statuses == [Status.FAIL]  # nothing ACTIVE left: NCCL falls back to sockets


def test_port_syntax_and_exclusion() -> None:
    assert not list(check_ib_hca("=mlx5_0:1,mlx5_3:1", PORTS))
    bad, nothing = list(check_ib_hca("mlx5_0:x", PORTS))
    assert bad.status is Status.FAIL
    assert "port" in bad.message
    assert nothing.status is Status.FAIL
    assert "no ACTIVE port" in nothing.message
    assert next(f.observed for f in check_ib_hca("=mlx5_0:2", PORTS)) == "mlx5_0:2"
    # excluding a name that does not exist is a likely typo; exclusion keeps the rest
    (warn,) = list(check_ib_hca("^=mlx5_7", PORTS))
    assert warn.status is Status.WARN
    assert not list(check_ib_hca("^=mlx5_1,mlx5_2", PORTS))


def test_gdr_level_legacy_integers() -> None:
    assert [gdr_level(v) for v in ("0", "2", "5", "phb", "x")] == ["LOC", "PXB", "SYS", "PHB",
                                                                   None]
