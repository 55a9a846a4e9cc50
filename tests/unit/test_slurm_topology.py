"""Slurm's base blocks read from the examples of Slurm's own man pages (topology.conf(5),
topology.yaml(5)) and from ``scontrol show topology`` as the block plugin prints it
(tests/fixtures/slurm/README.md says where each text comes from); what Slurm answers is
bounded and checked, and the sources are tried in the order Slurm itself reads them."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.slurm.topology import (
    TopologyError,
    parse_conf,
    parse_scontrol,
    parse_yaml,
    read_blocks,
)

FIXTURES = Path(__file__).parent.parent / "fixtures" / "slurm"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def _nodes(prefix: str, low: int, high: int, width: int = 0) -> tuple[str, ...]:
    return tuple(f"{prefix}{i:0{width}d}" for i in range(low, high + 1))


def test_topology_conf_man_page_example() -> None:
    blocks = parse_conf(_text("topology.conf.5-example"))
    assert blocks == {"block1": _nodes("node", 1, 32), "block2": _nodes("node", 33, 64),
                      "block3": _nodes("node", 65, 96), "block4": _nodes("node", 97, 128)}


def test_topology_conf_reads_keys_in_any_case_comments_and_continued_lines() -> None:
    text = ("blockname=b1 \\\n  NODES=n[1-2] # the first\n"
            "BlockName=b2 Nodes=n3\n")
    assert parse_conf(text) == {"b1": ("n1", "n2"), "b2": ("n3",)}


def test_an_escaped_hash_is_kept_and_then_refused_as_no_host_name() -> None:
    """``\\#`` is a literal '#' (parse_config.c), not a comment: the name it makes is read
    whole, and a node name with '#' in it is no host name."""
    with pytest.raises(TopologyError, match="not a host name"):
        parse_conf("BlockName=b2 Nodes=n3\\#x\n")


def test_a_tree_topology_conf_has_no_blocks() -> None:
    assert parse_conf("SwitchName=s0 Nodes=tux[0-3]\nSwitchName=s1 Switches=s0\n") is None


def test_topology_yaml_man_page_example_keeps_the_block_topology_only() -> None:
    blocks = parse_yaml(_text("topology.yaml.5-example"))
    assert blocks == {"b1": _nodes("node", 1, 4, 2), "b2": _nodes("node", 5, 8, 2),
                      "b3": _nodes("node", 9, 12, 2), "b4": _nodes("node", 13, 16, 2)}


def test_topology_yaml_names_blocks_by_topology_when_there_are_several() -> None:
    text = ("- topology: a\n  block:\n    blocks:\n      - {block: b1, nodes: 'n[1-2]'}\n"
            "- topology: b\n  block:\n    blocks:\n      - {block: b1, nodes: n3}\n")
    assert parse_yaml(text) == {"a/b1": ("n1", "n2"), "b/b1": ("n3",)}


@pytest.mark.parametrize("name", ["scontrol-show-topology-24.05",
                                  "scontrol-show-topology-24.11"])
def test_scontrol_base_blocks_without_the_aggregated_ones(name: str) -> None:
    assert parse_scontrol(_text(name)) == {"nvl1": _nodes("nvl1-tray", 1, 18, 2),
                                           "nvl2": _nodes("nvl2-tray", 1, 18, 2)}


def test_scontrol_showing_a_tree_or_nothing_is_no_block_topology() -> None:
    assert parse_scontrol("SwitchName=s0 Level=0 LinkSpeed=1 Nodes=tux[0-3]\n") is None
    assert parse_scontrol("") is None


@pytest.mark.parametrize(("text", "reason"), [
    ("BlockName=b1 Nodes=n[1-99999999]\n", "bad node set"),
    ("BlockName=b1 Nodes=n[1-2\n", "bad node set"),
    ("BlockName=<script> Nodes=n1\n", "not a plain name"),
    ("BlockName=b1 Nodes=n1\nBlockName=b1 Nodes=n2\n", "defined twice"),
    ("".join(f"BlockName=b{i} Nodes=n[1-60000]\n" for i in range(2)), "more than"),
])
def test_hostile_scontrol_output_is_refused_with_its_reason(text: str, reason: str) -> None:
    with pytest.raises(TopologyError, match=reason):
        parse_scontrol(text)


@pytest.mark.parametrize("text", ["- topology: t\n  block: {blocks: 3}\n", "{a: 1}\n",
                                  "- [\n", "- topology: t\n  block:\n    blocks: [7]\n"])
def test_malformed_topology_yaml_is_refused(text: str) -> None:
    with pytest.raises(TopologyError):
        parse_yaml(text)


def _config(scontrol: str, topology: str | None = None) -> Config:
    config = Config()
    config.data["prolog"]["scontrol"] = scontrol
    config.data["cluster"]["slurm_topology"] = topology
    return config


def _scontrol(tmp_path: Path, body: str) -> Config:
    program = tmp_path / "scontrol"
    program.write_text("#!/bin/sh\n" + body)
    program.chmod(program.stat().st_mode | stat.S_IXUSR)
    return _config(str(program))


def test_read_blocks_asks_scontrol_first(tmp_path: Path) -> None:
    config = _scontrol(tmp_path, f"cat {FIXTURES / 'scontrol-show-topology-24.11'}\n")
    (tmp_path / "topology.conf").write_text("BlockName=other Nodes=x1\n")
    found = read_blocks(config, {"SLURM_CONF": str(tmp_path / "slurm.conf")})
    assert (found.source, sorted(found.blocks)) == ("scontrol show topology", ["nvl1", "nvl2"])


def test_read_blocks_falls_back_to_the_files_beside_slurm_conf(tmp_path: Path) -> None:
    """A controller that does not answer: topology.yaml is read before topology.conf,
    as Slurm reads them."""
    config = _scontrol(tmp_path, "echo 'slurm_load_topo error: Unable to contact' >&2\nexit 1\n")
    (tmp_path / "topology.conf").write_text("BlockName=conf Nodes=x1\n")
    environ = {"SLURM_CONF": str(tmp_path / "slurm.conf")}
    assert read_blocks(config, environ).blocks == {"conf": ("x1",)}
    (tmp_path / "topology.yaml").write_text("- topology: t\n  block:\n    blocks:\n"
                                            "      - {block: yaml, nodes: x2}\n")
    found = read_blocks(config, environ)
    assert (found.source, found.blocks) == (str(tmp_path / "topology.yaml"), {"yaml": ("x2",)})


def test_read_blocks_without_slurm_says_what_it_tried(tmp_path: Path) -> None:
    config = _config("/nonexistent/scontrol")
    found = read_blocks(config, {"SLURM_CONF": str(tmp_path / "slurm.conf")})
    assert found.blocks == {}
    assert found.error is None
    assert found.skipped is not None
    assert "scontrol not found" in found.skipped
    assert f"no {tmp_path / 'topology.conf'}" in found.skipped


def test_read_blocks_reports_garbage_as_an_error_not_a_skip(tmp_path: Path) -> None:
    config = _scontrol(tmp_path, "echo 'BlockName=b1 Nodes=n[1-'\n")
    found = read_blocks(config, {})
    assert found.error is not None
    assert found.error.startswith("scontrol show topology: ")


def test_read_blocks_reads_the_configured_file(tmp_path: Path) -> None:
    path = tmp_path / "site-topology.conf"
    path.write_text("BlockName=b9 Nodes=n9\n")
    config = _config("/nonexistent/scontrol", str(path))
    assert read_blocks(config, {}).blocks == {"b9": ("n9",)}
