"""What a run needs, from the flags and the config: the Config, the SourceEnv (where the
node is read from) and the RunOptions (level, profile, budget, which checks).

The CLI, the daemon and the Slurm entry points all start here, so a flag means the same in
each and none of them imports another's command code. Imports inside the functions keep
importing this module cheap: the prolog's start time counts (docs/design.md §2).
"""

from __future__ import annotations

import os

from ... import checks
from ...checks.core.index import schemas
from ...checks.core.levels import Level, Mode
from ..base.errors import CollectError, UsageError
from ..settings.config import MIN_BUDGET_S, load_config, seconds_problem

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from pathlib import Path

    from ..read.sources import SourceEnv
    from ..settings.config import Config
    from ..settings.config_cache import RootStore
    from .runner import RunOptions


def load(config_path: str | Path | None, cache: RootStore | None = None) -> Config:
    """The config file (or the defaults), validated against the check catalog, and the
    site profiles it points at registered; a ``profile:`` file becomes its name. ``cache``:
    the prolog's validated copy of a YAML file (settings/config_cache.py)."""
    config = load_config(config_path, schemas(), cache)
    config.data["profile"] = site_profile(config, config.data["profile"])
    return config


def is_profile_file(value: str) -> bool:
    """Whether a ``--profile``/``profile:`` value names a file rather than a profile."""
    return value.endswith((".yaml", ".yml")) or "/" in value


def site_profile(config: Config, name: str) -> str:
    """Register the site profiles (``profile_dir``, and ``name`` when it is a file) and
    return the name to run with. Nothing is imported when there is none: the prolog's
    start time counts."""
    directory = config.data["profile_dir"]
    if not is_profile_file(name) and not os.path.isdir(directory):
        return name
    from pathlib import Path  # pathlib off the fresh-report prolog path

    extra = Path(name) if is_profile_file(name) else None
    # Site profiles only where there are some.
    from ...checks.profiles.profile import add_site_profiles
    from ..settings.site_profiles import load_site_profiles

    loaded = load_site_profiles(Path(directory), extra)
    add_site_profiles({n: site.profile for n, site in loaded.items()})
    return extra.name.rsplit(".", 1)[0] if extra is not None else name


def setup(config_path: str | Path | None, root: str | Path | None,
          kernel_log: str | Path | None, simulate: str | None, node: str | None
          ) -> tuple[Config, SourceEnv]:
    """The config and where the node is read from: the live machine, a captured tree
    (``--root``), a kernel-log file, or the simulator."""
    config = load(config_path)
    return config, source_env(config, root, kernel_log, simulate, node)


def check_places(root: str | Path | None, kernel_log: str | Path | None) -> None:
    """Refuse a ``--root`` that is no directory, a ``--kernel-log`` that is no file."""
    if root is not None and not os.path.isdir(root):
        raise CollectError(f"--root {root}: not a readable directory")
    if kernel_log is not None and not os.path.isfile(kernel_log):
        raise UsageError(f"--kernel-log {kernel_log}: no such file")


def node_name(config: Config, node: str | None) -> str:
    """The node's name: the config's ``node_name``, else ``node`` (a flag, Slurm's
    SLURMD_NODENAME), else the host name."""
    if config.data.get("node_name"):
        return str(config.data["node_name"])
    if node:
        return node
    from ..read.sources import host_name  # the sources are off the fresh-report prolog path

    return host_name()


def simulated_nodes(simulate: str) -> list[str]:
    """The node names of a ``--simulate`` spec (one for a profile name), in spec order."""
    from ..sim.spec import load_spec  # the simulator only under --simulate

    return list(load_spec(simulate).nodes)


def source_env(config: Config, root: str | Path | None, kernel_log: str | Path | None,
               simulate: str | None, node: str | None) -> SourceEnv:
    """Where the node is read from (see ``setup``)."""
    from pathlib import Path  # the sources are off the fresh-report prolog path

    from ..read.sources import SourceEnv

    if simulate is not None:
        from ..sim.node import simulated_env  # the simulator only under --simulate

        env = simulated_env(simulate, node, config)
    else:
        from .nccl_cache import NAME, PersistedVersions  # the NCCL cache only on a real node

        cache = Path(config.section("agent")["state_dir"]) / NAME
        env = SourceEnv(node=node_name(config, node), nccl_versions=PersistedVersions(cache))
    check_places(root, kernel_log)
    if root is not None:
        env.root = Path(root)
    if kernel_log is not None:
        env.kernel_log_file = Path(kernel_log)
    return env


def check_patterns(patterns: str | None) -> tuple[str, ...]:
    """``--checks``: comma-separated globs, each of which must select a check (a typo
    such as ``nvlnk.*`` would otherwise run nothing and print READY)."""
    globs = tuple(p.strip() for p in (patterns or "").split(",") if p.strip())
    for glob in globs:
        if not checks.select([glob]):
            raise UsageError(f"--checks {glob!r}: selects no check (see clusterdiag checks "
                             "list)")
    return globs


def budget_flag(budget: float | None) -> float | None:
    """``--budget`` of ``run`` and ``snapshot``: at least config.MIN_BUDGET_S, finite.
    (The Slurm entry points pass what is left of their own budget, which is theirs.)"""
    if budget is not None and (problem := seconds_problem(budget, MIN_BUDGET_S)):
        raise UsageError(f"--budget {budget:g}: {problem}")
    return budget


def run_options(config: Config, level: str | None, profile: str | None,
                budget: float | None, patterns: str | None, mode: str = "run") -> RunOptions:
    """The flags over the config's defaults; an unknown profile name or a glob that
    selects nothing is a usage error. ``level`` and ``mode`` are words, as click, the config
    (both validated against checks.core.levels) and the Slurm program name give them."""
    # The runner and profiles are off the fresh-report prolog path.
    from ...checks.profiles.profile import UnknownProfileError, load_profile
    from .runner import RunOptions

    name = site_profile(config, profile) if profile else config.data["profile"]
    if name != "auto":
        try:
            load_profile(name)
        except UnknownProfileError as exc:
            raise UsageError(str(exc)) from None
    return RunOptions(
        level=Level(level or config.data["level"]), mode=Mode(mode),
        patterns=check_patterns(patterns),
        budget_s=float(budget if budget is not None else config.data["budget_s"]),
        profile=name, full_interval_s=float(config.data["full_interval_s"]),
    )
