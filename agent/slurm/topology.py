"""Slurm's base blocks (topology/block): which nodes Slurm keeps together for one job.

Read, in this order, from:

- ``scontrol show topology``: what slurmctld runs, and the only source on a configless
  site (its nodes hold no topology file). The block plugin prints one line per block,
  ``BlockName=b1 BlockIndex=0 Nodes=node[01-04] BlockSize=4`` (SchedMD/slurm
  src/plugins/topology/block/topology_block.c, ``_print_topo_record``: ``BlockSize``
  since 24.11, before it the line ends at ``Nodes``); since 24.11 the blocks it joins
  into larger ones follow as ``AggregatedBlock=...`` lines, which span several base
  blocks by design and are not compared. A tree topology prints ``SwitchName=`` lines.
- ``topology.yaml`` (Slurm 25.05+; topology.yaml(5): a list of topologies, each with a
  ``block:`` holding ``blocks:`` of ``block:``/``nodes:``), which Slurm reads first:
  "If this file exists, topology.conf will be ignored".
- ``topology.conf`` (topology.conf(5), topology/block: ``BlockName=... Nodes=...`` per
  line, ``BlockSizes=`` beside them, keys case-insensitive, ``#`` to the end of the
  line a comment, a trailing backslash joins the next line: src/common/parse_config.c
  ``_get_next_line``).

Both files sit "in the same directory as the slurm.conf" (topology.conf(5)): the
directory of ``SLURM_CONF``, else /etc/slurm, unless ``cluster.slurm_topology`` names
the file. Node names are hostlist expressions, expanded with the project's bounded
expansion (agent/model/nodeset.py). What Slurm answers is bounded and checked: at most
MAX_BYTES read, block names of plain characters, every node set within MAX_NODES in
all; anything else is a TopologyError with its reason, never a guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from ClusterShell.NodeSet import NodeSetParseError

from ..base.inert import shown
from ..base.safefile import describe, read_regular
from ..model.nodeset import MAX_NODES, expand, short
from ..model.slurm_blocks import SlurmBlocks
from .scontrol import Scontrol, SlurmError

if TYPE_CHECKING:
    from ..settings.config import Config

MAX_BYTES = 8 << 20  # 100,000 nodes in blocks of 18 print about 0.4 MB
# Slurm takes any name; a name that goes into every report renderer is held to these.
_BLOCK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:+@/-]{0,128}")
_DEFAULT_DIR = "/etc/slurm"

Blocks = dict[str, tuple[str, ...]]


class TopologyError(ValueError):
    """What Slurm answered is not a block topology we can read: the reason, one line."""


def _add(blocks: Blocks, name: object, nodes: object, total: list[int]) -> None:
    text = str(name)
    if not _BLOCK_NAME.fullmatch(text):
        raise TopologyError(f"block name {shown(short(text))} is not a plain name")
    if text in blocks:
        raise TopologyError(f"block {text} is defined twice")
    try:
        members = tuple(expand(str(nodes))) if nodes not in (None, "") else ()
    except NodeSetParseError as exc:
        raise TopologyError(f"block {text}: bad node set: {shown(str(exc))}") from None
    total[0] += len(members)
    if total[0] > MAX_NODES:
        raise TopologyError(f"the blocks hold more than {MAX_NODES} nodes")
    blocks[text] = members


def _fields(line: str) -> dict[str, str]:
    """``Key=value`` words of one line, keys lower-cased (Slurm reads them so)."""
    found: dict[str, str] = {}
    for word in line.split():
        key, sep, value = word.partition("=")
        if sep:
            found[key.lower()] = value
    return found


def parse_scontrol(text: str) -> Blocks | None:
    """The base blocks of ``scontrol show topology``; None when it shows no block
    topology (a tree, a flat one, nothing configured)."""
    blocks: Blocks = {}
    total = [0]
    for line in text.splitlines():
        fields = _fields(line)
        if "blockname" in fields:
            _add(blocks, fields["blockname"], fields.get("nodes"), total)
    return blocks or None


def _conf_lines(text: str) -> Iterable[str]:
    joined = ""
    for raw in text.splitlines():
        line = re.sub(r"(?<!\\)#.*", "", raw).replace("\\#", "#")
        if line.rstrip().endswith("\\"):
            joined += line.rstrip()[:-1]
            continue
        yield joined + line
        joined = ""
    if joined:
        yield joined


def parse_conf(text: str) -> Blocks | None:
    """The blocks of a topology.conf; None when it defines none (a tree's SwitchName)."""
    blocks: Blocks = {}
    total = [0]
    for line in _conf_lines(text):
        fields = _fields(line)
        if "blockname" in fields:
            _add(blocks, fields["blockname"], fields.get("nodes"), total)
    return blocks or None


def parse_yaml(text: str) -> Blocks | None:
    """The blocks of a topology.yaml's block topologies; None when it has none. With
    several block topologies a block is named ``topology/block``: each is its own plan."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise TopologyError(f"malformed YAML: {problem}") from None
    except RecursionError:
        raise TopologyError("malformed YAML: nested too deeply") from None
    if data is None:
        return None
    if not isinstance(data, list):
        raise TopologyError("not a list of topologies")
    plans = [t for t in data if isinstance(t, dict) and t.get("block") is not None]
    blocks: Blocks = {}
    total = [0]
    for plan in plans:
        block = plan["block"]
        entries = block.get("blocks") if isinstance(block, dict) else None
        if not isinstance(entries, list):
            raise TopologyError(f"topology {shown(short(str(plan.get('topology'))))}: "
                                "block has no list of blocks")
        for entry in entries:
            if not isinstance(entry, dict) or "block" not in entry:
                raise TopologyError("a block entry without a block name")
            name = str(entry["block"])
            if len(plans) > 1:
                name = f"{plan.get('topology')}/{name}"
            _add(blocks, name, entry.get("nodes"), total)
    return blocks or None


def topology_files(configured: str | None, environ: Mapping[str, str]) -> list[Path]:
    """Where Slurm's topology files are: the configured file, else topology.yaml then
    topology.conf beside slurm.conf (SLURM_CONF's directory, else /etc/slurm)."""
    if configured:
        return [Path(configured)]
    conf = environ.get("SLURM_CONF")
    folder = Path(os.path.dirname(os.path.abspath(conf))) if conf else Path(_DEFAULT_DIR)
    return [folder / "topology.yaml", folder / "topology.conf"]


def _from_file(path: Path) -> SlurmBlocks | None:
    """The blocks of ``path``; None when it does not exist."""
    try:
        text = read_regular(path, MAX_BYTES, follow=True).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        return SlurmBlocks(str(path), error=f"{path}: {describe(exc)}")
    parse = parse_yaml if path.suffix in (".yaml", ".yml") else parse_conf
    try:
        blocks = parse(text)
    except TopologyError as exc:
        return SlurmBlocks(str(path), error=f"{path}: {exc}")
    if blocks is None:
        return SlurmBlocks(str(path), skipped=f"{path} defines no blocks (not topology/block)")
    return SlurmBlocks(str(path), blocks)


def read_blocks(config: Config, environ: Mapping[str, str] | None = None) -> SlurmBlocks:
    """Slurm's base blocks as the cluster's controller has them, else as its files say
    (``cluster.slurm_topology``); scontrol is the one the prolog uses (``prolog.scontrol``)."""
    env = dict(os.environ if environ is None else environ)
    tried: list[str] = []
    scontrol = Scontrol(config.section("prolog").get("scontrol"), env)
    try:
        text = scontrol.show_topology(MAX_BYTES)
    except SlurmError as exc:
        tried.append(str(exc))
    else:
        source = "scontrol show topology"
        try:
            blocks = parse_scontrol(text)
        except TopologyError as exc:
            return SlurmBlocks(source, error=f"{source}: {exc}")
        if blocks is not None:
            return SlurmBlocks(source, blocks)
        tried.append(f"{source}: no BlockName lines (not topology/block)")
    for path in topology_files(config.section("cluster").get("slurm_topology"), env):
        found = _from_file(path)
        if found is None:
            tried.append(f"no {path}")
        elif found.skipped is None:
            return found
        else:
            tried.append(found.skipped)
    return SlurmBlocks(skipped="no Slurm block topology: " + "; ".join(tried))
