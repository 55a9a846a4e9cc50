"""``clusterdiag profiles list|show NAME|FILE``: the platform profiles, built-in and the
site's (agent/settings/site_profiles.py)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

import click
import yaml

from ...checks.profiles.profile import (
    UnknownProfileError,
    builtin_names,
    load_builtin,
    load_profile,
    profile_names,
)
from ..base.errors import UsageError
from ..capture.majority import majority
from ..capture.profile import capture
from ..run import session
from ..run.collect import collect_snapshot
from ..run.runner import resolve_profile
from ..run.snapshot_file import load_snapshot
from ..settings.site_profiles import load_site_profiles
from .options import source_options

if TYPE_CHECKING:
    from ...checks.profiles.profile import Profile

_CONFIG = click.option("--config", "config_path", type=click.Path(path_type=Path),
                       default=None, help="Config file (its profile_dir holds site profiles).")


@click.group("profiles")
def profiles_group() -> None:
    """Platform profiles."""


@profiles_group.command("list")
@_CONFIG
def profiles_list(config_path: Path | None) -> None:
    """Every profile: the built-in ones and the site's."""
    session.load(config_path)
    builtin = set(builtin_names())
    for name in profile_names():
        prof = load_profile(name)
        flag = " (provisional)" if prof.provisional else ""
        site = "" if name in builtin else " (site)"
        click.echo(f"{name:16} {prof.description}{flag}{site}")


@profiles_group.command("show")
@_CONFIG
@click.argument("name")
def profiles_show(config_path: Path | None, name: str) -> None:
    """The merged profile, each value with where it came from."""
    config = session.load(config_path)
    resolved = session.site_profile(config, name)
    sites = load_site_profiles(Path(config.data["profile_dir"]),
                               Path(name) if session.is_profile_file(name) else None)
    if resolved in sites:
        site = sites[resolved]
        data, origins = site.profile.to_dict(), site.origins
        click.echo(f"# site profile {site.path}" +
                   (f", extends {site.extends}" if site.extends else ""))
    else:
        try:
            data = load_builtin(resolved).to_dict()
        except UnknownProfileError as exc:
            raise UsageError(str(exc)) from None
        origins = {key: f"built-in {resolved}" for key in data}
    for key, value in data.items():
        lines = yaml.safe_dump({key: value}, sort_keys=False).rstrip().splitlines()
        lines[0] += f"   # {origins[key]}"
        click.echo("\n".join(lines))


@profiles_group.command("capture")
@source_options
@click.option("--extends", "base", default=None, metavar="NAME",
              help="The profile the capture extends (default: the one detected).")
@click.option("--output", type=click.Path(path_type=Path), default=None,
              help="Write the profile here (default: standard output).")
@click.option("--from-snapshot", "snapshots", multiple=True, type=click.Path(path_type=Path),
              metavar="FILE", help="Capture from saved snapshots instead of this node (repeat "
                                   "it for a fleet: the majority's values, and the nodes that "
                                   "deviate on standard error).")
def profiles_capture(config_path: Path | None, root: Path | None, kernel_log: Path | None,
                     simulate: str | None, node: str | None, profile: str | None,
                     level: str | None, base: str | None, output: Path | None,
                     snapshots: tuple[Path, ...]) -> None:
    """A site profile from this (healthy) node as it is, each value with what it was
    read from; what could not be read is left to --extends. With --from-snapshot, from
    saved snapshots (``clusterdiag snapshot``, an agent's /v1/snapshot) of a fleet."""
    config = session.load(config_path)
    options = session.run_options(config, level, profile, None, None)
    try:
        extends = load_profile(session.site_profile(config, base)) if base else None
    except UnknownProfileError as exc:
        raise UsageError(f"--extends: {exc}") from None
    if base and session.is_profile_file(base):
        _note_base_outside_profile_dir(Path(base), Path(config.data["profile_dir"]))
    if snapshots:
        if root or simulate or kernel_log:
            raise UsageError("--from-snapshot: reads saved snapshots, not a node "
                             "(drop --root, --simulate, --kernel-log)")
        text = _fleet_capture(snapshots, extends, options.profile)
    else:
        env = session.source_env(config, root, kernel_log, simulate, node)
        snap = collect_snapshot(env, ("host", "pci", "nvml", "infiniband"),
                                time.monotonic() + options.budget_s, options.level)
        text = capture(snap, extends or resolve_profile(options.profile, snap)[0]
                       ).to_yaml(snap.node)
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--output {output}: {exc.strerror or exc}") from None


def _note_base_outside_profile_dir(base: Path, directory: Path) -> None:
    """The captured profile names its base by name (``extends: site``), and a name is
    found only in ``profile_dir``: a base read from a file elsewhere must be copied there
    too, or the capture will not load. Said on standard error; the capture still goes out."""
    try:
        inside = base.resolve().parent == directory.resolve()
    except OSError:
        inside = False
    if not inside:
        name = base.name.rsplit(".", 1)[0]
        click.echo(f"clusterdiag: note: the capture says 'extends: {name}', and a profile "
                   f"is found by name only in profile_dir ({directory}): copy {base} there "
                   "beside it, or it will not load", err=True)


def _fleet_capture(paths: tuple[Path, ...], extends: Profile | None, profile: str) -> str:
    """The majority profile of the snapshots in ``paths``; the nodes deviating from it on
    standard error. Without --extends, the base is the profile most snapshots detect as."""
    if extends is None:
        detected = Counter(resolve_profile(profile, load_snapshot(p))[0].name for p in paths)
        extends = load_profile(detected.most_common(1)[0][0])
    base = extends
    captures = [(snap.node, capture(snap, base))
                for snap in (load_snapshot(p) for p in paths)]
    merged, deviations = majority(captures, base.name)
    for deviation in deviations:
        click.echo(f"clusterdiag profiles capture: deviates: {deviation.line()}", err=True)
    return merged.to_yaml(f"the majority of {len(paths)} snapshots")


COMMANDS = (profiles_group,)
