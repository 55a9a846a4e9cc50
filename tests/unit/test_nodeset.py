"""Node sets: Slurm syntax expands, an absurd range is refused before it costs minutes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSetParseError

from clusterdiag.agent.model.nodeset import MAX_NODES, expand
from tests.conftest import run_cli


def test_slurm_syntax_expands() -> None:
    assert expand("gpu[001-003,010]") == ["gpu001", "gpu002", "gpu003", "gpu010"]


def test_a_typo_sized_range_is_refused_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(NodeSetParseError, match=f"more than {MAX_NODES} nodes"):
        expand("n[1-99999999]")
    assert time.monotonic() - started < 5.0  # expanding 10^8 names would take minutes


def test_a_spec_with_an_absurd_range_is_a_one_line_usage_error(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - {names: 'n[1-99999999]', profile: dgx-h100}\n")
    proc = run_cli("run", "--simulate", str(spec))
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1
    assert "more than 100000 nodes" in proc.stderr


@pytest.mark.parametrize("text", ["-oProxyCommand=touch_x", "a;b", "n$(id)", "x y", "n'1",
                                  "n\u202e1", "n[1-2]`id`"])
def test_a_name_that_is_no_host_name_is_refused(text: str) -> None:
    """Node names go into argv (ssh's destination, srun's --nodelist) and reports: one
    that ssh would read as an option, or that holds a shell character, is refused."""
    with pytest.raises(NodeSetParseError, match="not a host name"):
        expand(text)


def test_host_names_and_addresses_expand() -> None:
    assert expand("gpu-a_01.rack[1-2].example,10.0.0.7") == [
        "10.0.0.7", "gpu-a_01.rack1.example", "gpu-a_01.rack2.example"]
