"""A simulated node as a SourceEnv: its state built from a spec with its faults (state/,
faults/), its own filesystem tree, NVML stand-in and commands (writers/)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...checks.profiles.profile import load_profile
from ..base.errors import UsageError
from ..read.sources import SourceEnv
from ..settings.config import Config
from .faults.catalog import FAULTS
from .schedule import Schedule, present, timed
from .spec import ClusterSpec, NodeSpec, load_spec
from .state.hardware import SimNode, build_node
from .state.ib import ROCE_NCCL_TC, build_hcas, roce_fabric
from .state.layout import OEM_DMI_PRODUCT
from .writers.commands import command_runner
from .writers.nccl import versions
from .writers.nvml import build_module
from .writers.tree import write_tree
from .writers.tree_ib import refresh_counters


def build(spec: NodeSpec, faults: list[dict[str, Any]] | None = None) -> SimNode:
    """The node with ``faults`` applied; by default those present at its start (a fault
    with a later ``from_s`` arrives through the Schedule hook)."""
    node = build_node(spec.name, load_profile(spec.profile), rack=spec.rack,
                      clique_id=spec.clique)
    if spec.layout == "oem":
        node.layout = replace(node.layout, dmi_product=OEM_DMI_PRODUCT)
        node.hcas = build_hcas(spec.name, spec.profile, node.profile.nic_pcie_gen,
                               node.profile.nic_pcie_width, oem=True)
    if spec.fabric == "roce":
        roce_fabric(node.hcas)
        node.nccl.conf["NCCL_IB_TC"] = ROCE_NCCL_TC
    for fault in [f for f in spec.faults if present(f, 0.0)] if faults is None else faults:
        FAULTS[fault["kind"]].apply(node, fault)
    return node


_TREE_PREFIX = "clusterdiag-sim-"


def make_root(node: SimNode) -> Path:
    """The tree goes on tmpfs where there is one (like the real /sys and /proc): on a
    disk-backed /tmp writing its ~800 small files costs about a second. Its name carries
    the owner's pid, so trees left by a killed process (atexit never ran) are swept."""
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())
    sweep_orphans(base)
    root = Path(tempfile.mkdtemp(prefix=f"{_TREE_PREFIX}{os.getpid()}-{node.name}-", dir=base))
    atexit.register(shutil.rmtree, root, True)
    write_tree(node, root)
    return root


def sweep_orphans(base: Path) -> None:
    """Remove the simulated trees whose owning process is gone."""
    for entry in base.glob(f"{_TREE_PREFIX}*"):
        owner = entry.name[len(_TREE_PREFIX):].split("-", 1)[0]
        if owner.isdecimal() and not _alive(int(owner)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def env_for(spec: NodeSpec) -> SourceEnv:
    node = build(spec)
    module = build_module(node)
    root = make_root(node)
    hooks: list[Callable[[], None]] = [lambda: refresh_counters(node, root)]
    if any(timed(f) for f in spec.faults):  # faults come and go: before the counters
        hooks.insert(0, Schedule(node, spec.faults, root, lambda now: build(spec, now),
                                 write_tree))
    return SourceEnv(node=spec.name, root=root, nvml=lambda: module,
                     runner=command_runner(node), environ={}, find_library=lambda name: None,
                     simulated=True, before_sample=hooks,
                     nccl_versions=versions(root), python_site_dirs=list)


def pick(cluster: ClusterSpec, name: str | None) -> NodeSpec:
    if name is None:
        return next(iter(cluster.nodes.values()))
    if name not in cluster.nodes:
        raise UsageError(f"--node {name}: not in the simulation spec {cluster.source}")
    return cluster.nodes[name]


def simulated_env(arg: str, name: str | None, config: Config) -> SourceEnv:
    return env_for(pick(load_spec(arg), name))
