"""The ``clusterdiag`` command. Exit codes: 0 ready, 1 a fail, 2 usage or config, 3 could
not collect at all. User errors print one line on stderr, never a traceback."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from . import cli_cluster
from .errors import ClusterdiagError, CollectError, UsageError

EXIT_READY, EXIT_FAIL, EXIT_USAGE, EXIT_COLLECT = 0, 1, 2, 3


def _die(message: str, code: int) -> NoReturn:
    click.echo(f"clusterdiag: {message}", err=True)
    sys.exit(code)


def source_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """The flags that say where the node is read from (DESIGN §3)."""
    for option in reversed([
        click.option("--root", type=click.Path(path_type=Path), default=None,
                     help="Read DIR/sys, DIR/proc, DIR/dev instead of /sys, /proc, /dev."),
        click.option("--kernel-log", type=click.Path(path_type=Path), default=None,
                     help="Read kernel messages from FILE instead of the live kernel log."),
        click.option("--simulate", "simulate", default=None, metavar="SPEC",
                     help="Use the simulator: a profile name (dgx-h100) or a spec file."),
        click.option("--node", default=None, help="With a spec of several nodes, which one."),
        click.option("--profile", default=None, help="Platform profile, or auto (default)."),
        click.option("--level", type=click.Choice(["quick", "full"]), default=None,
                     help="quick (default) skips rate and active checks."),
        click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
                     help="Config file (default /etc/clusterdiag/config.yaml when present)."),
    ]):
        func = option(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="clusterdiag", prog_name="clusterdiag")
def cli() -> None:
    """Cluster health and topology diagnostics for GPU training clusters."""


def _setup(config_path: Path | None, root: Path | None, kernel_log: Path | None,
           simulate: str | None, node: str | None) -> tuple[Any, Any]:
    from .. import checks
    from .config import load_config
    from .sources import SourceEnv

    catalog = {spec.id: spec.params for spec in checks.REGISTRY.values()}
    config = load_config(config_path, catalog)
    if simulate is not None:
        from .sim.node import simulated_env

        env = simulated_env(simulate, node, config)
    else:
        env = SourceEnv()
        if node:
            env.node = node
        if config.data.get("node_name"):
            env.node = config.data["node_name"]
    if root is not None:
        if not root.is_dir():
            raise CollectError(f"--root {root}: not a readable directory")
        env.root = root
    if kernel_log is not None:
        if not kernel_log.is_file():
            raise UsageError(f"--kernel-log {kernel_log}: no such file")
        env.kernel_log_file = kernel_log
    return config, env


def _options(config: Any, level: str | None, profile: str | None, budget: float | None,
             patterns: str | None, mode: str = "run") -> Any:
    from ..checks.profile import UnknownProfileError, load_profile
    from .runner import RunOptions

    name = profile or config.data["profile"]
    if name != "auto":
        try:
            load_profile(name)
        except UnknownProfileError as exc:
            raise UsageError(str(exc)) from None
    return RunOptions(
        level=level or config.data["level"], mode=mode,
        patterns=tuple(p for p in (patterns or "").split(",") if p),
        budget_s=float(budget if budget is not None else config.data["budget_s"]),
        profile=name, full_interval_s=float(config.data["full_interval_s"]),
    )


@cli.command()
@source_options
@click.option("--checks", "patterns", default=None, help="Glob(s) of check ids, comma-separated.")
@click.option("--budget", type=float, default=None, help="Seconds the whole run may take.")
@cli_cluster.report_options
@click.option("--nodes", default=None, metavar="NODESET",
              help="Nodes to gather (gpu[001-128]), '-' for stdin, or a file of node sets; "
                   "inside an allocation, SLURM_JOB_NODELIST.")
@click.option("--via", type=click.Choice(["local", "agent", "ssh", "srun"]), default=None,
              help="local (this node; the default without --nodes), agent (default with "
                   "--nodes), ssh (ClusterShell) or srun.")
def run(config_path: Path | None, root: Path | None, kernel_log: Path | None,
        simulate: str | None, node: str | None, profile: str | None, level: str | None,
        patterns: str | None, budget: float | None, fmt: str, output: Path | None,
        exclude_file: Path | None, need: int | None, nodes: str | None,
        via: str | None) -> None:
    """Check this node, or gather every node of --nodes, and print the report."""
    from ..checks.finding import Status
    from ..reports.table import render_table
    from .runner import run_node

    if via not in (None, "local") or nodes:
        forward = {"--level": level, "--checks": patterns, "--profile": profile,
                   "--budget": budget}
        local_only = {"--root": root, "--kernel-log": kernel_log, "--simulate": simulate,
                      "--node": node}
        sys.exit(cli_cluster.run_cluster(config_path, nodes, via, forward, local_only, fmt,
                                         output, exclude_file, need))
    config, env = _setup(config_path, root, kernel_log, simulate, node)
    report = run_node(env, config, _options(config, level, profile, budget, patterns))
    if fmt in ("md", "html") or exclude_file is not None or need is not None:
        cluster = cli_cluster.one_node_report(config, report, need)
        sys.exit(cli_cluster.emit(cluster, fmt, output, exclude_file))
    if fmt == "json":
        text = json.dumps(report.to_dict(), indent=2) + "\n"
    else:
        text = render_table(report, colour=output is None and sys.stdout.isatty())
    _write(text, output)
    verdict = report.verdict
    sys.exit(EXIT_FAIL if verdict in (Status.FAIL, Status.ERROR) else EXIT_READY)


def _write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text)
    except OSError as exc:
        raise UsageError(f"--output {output}: {exc.strerror or exc}") from None


@cli.command()
@source_options
@click.option("--budget", type=float, default=None)
def snapshot(config_path: Path | None, root: Path | None, kernel_log: Path | None,
             simulate: str | None, node: str | None, profile: str | None,
             level: str | None, budget: float | None) -> None:
    """Print the raw Snapshot of this node as JSON."""
    import time

    from .collect import SOURCES, collect_snapshot

    config, env = _setup(config_path, root, kernel_log, simulate, node)
    options = _options(config, level, profile, budget, None)
    snap = collect_snapshot(env, SOURCES, time.monotonic() + options.budget_s, options.level)
    sys.stdout.write(json.dumps(snap.to_dict(), indent=2) + "\n")


@cli.group("checks")
def checks_group() -> None:
    """The check catalog."""


@checks_group.command("list")
def checks_list() -> None:
    """One line per check: id, levels, summary."""
    from .. import checks
    from ..reports.cluster_checks import CATALOG

    for spec in checks.select(None):
        click.echo(f"{spec.id:28} {'/'.join(spec.levels):11} {spec.summary}")
    for check_id, summary in CATALOG.items():
        click.echo(f"{check_id:28} {'cluster':11} {summary}")


@checks_group.command("explain")
@click.argument("check_id")
def checks_explain(check_id: str) -> None:
    """What a check looks at, what it needs, its defaults and its remedy."""
    from .. import checks
    from ..reports.cluster_checks import CATALOG

    if check_id in CATALOG:
        _explain_cluster_check(check_id, CATALOG[check_id])
        return
    spec = checks.REGISTRY.get(check_id)
    if spec is None:
        import difflib

        close = difflib.get_close_matches(check_id, [*checks.REGISTRY, *CATALOG], n=1)
        raise UsageError(f"unknown check {check_id!r}"
                         + (f" (did you mean {close[0]!r}?)" if close else ""))
    click.echo(f"{spec.id}: {spec.summary}")
    doc = (spec.func.__doc__ or "").strip().splitlines()[1:]
    if any(line.strip() for line in doc):
        click.echo("\n".join(line.strip() for line in doc).strip())
    click.echo(f"needs:   {', '.join(spec.needs) or 'nothing'}")
    click.echo(f"levels:  {', '.join(spec.levels)}")
    if spec.skip_in:
        click.echo(f"skipped in: {', '.join(sorted(spec.skip_in))}")
    if spec.params:
        click.echo(f"defaults (override under checks.{spec.id} in the config):")
        for key, value in spec.params.items():
            click.echo(f"  {key}: {json.dumps(value)}")
    if spec.actions:
        click.echo(f"actions: {', '.join(a.value for a in spec.actions)}")
    click.echo(f"remedy:  {spec.remedy}")


def _explain_cluster_check(check_id: str, summary: str) -> None:
    """Cluster checks judge node reports side by side, so they run wherever reports meet."""
    import importlib

    module = importlib.import_module(f"..reports.cluster_checks.{check_id.split('.', 1)[1]}",
                                     __package__)
    click.echo(f"{check_id}: {summary}")
    doc = (module.__doc__ or "").strip()
    if doc:
        click.echo(doc)
    click.echo("runs in: cluster reports (run --nodes, report merge, demo), over node reports")
    click.echo("settings: the cluster: section of the config")


@cli.group("profiles")
def profiles_group() -> None:
    """Platform profiles."""


@profiles_group.command("list")
def profiles_list() -> None:
    from ..checks.profile import load_profile, profile_names

    for name in profile_names():
        prof = load_profile(name)
        flag = " (provisional)" if prof.provisional else ""
        click.echo(f"{name:16} {prof.description}{flag}")


@profiles_group.command("show")
@click.argument("name")
def profiles_show(name: str) -> None:
    import yaml

    from ..checks.profile import UnknownProfileError, load_profile

    try:
        prof = load_profile(name)
    except UnknownProfileError as exc:
        raise UsageError(str(exc)) from None
    click.echo(yaml.safe_dump(prof.to_dict(), sort_keys=False).rstrip())


# Each further command lives in its own module; importing one costs only click.
from . import cli_cluster, cli_daemon, cli_slurm, cli_topo  # noqa: E402

for _module in (cli_daemon, cli_slurm, cli_cluster, cli_topo):
    _module.register(cli)


# Slurm drains a node on any non-zero exit of these: a wrapper with a bad flag, or a
# crash outside the entry point's own guard (slurm/entry.py execute()), is our trouble,
# not the node's, so it exits 0 with a loud line (DESIGN §3). fail_closed cannot apply
# here: the command line or config that would say it is what may have failed.
SLURM_ENTRY_POINTS = frozenset({"prolog", "epilog", "healthcheck"})


def _slurm_entry_point() -> str | None:
    return sys.argv[1] if SLURM_ENTRY_POINTS & set(sys.argv[1:2]) else None


def _spare_the_node(program: str, trouble: str) -> NoReturn:
    trouble = " ".join(trouble.split())
    _die(f"{program}: ERROR {trouble}; exiting 0 so Slurm does not drain the node for it "
         "(fail_closed cannot be read here)", EXIT_READY)


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        if SLURM_ENTRY_POINTS & set(sys.argv[1:2]):
            _die(f"{sys.argv[1]}: usage error above; exiting 0 so Slurm does not drain the node "
                 "for it", EXIT_READY)
        sys.exit(EXIT_USAGE)
    except click.Abort:
        _die("aborted", 130)
    except ClusterdiagError as exc:
        if program := _slurm_entry_point():
            _spare_the_node(program, str(exc))
        _die(str(exc), exc.exit_code)
    except BrokenPipeError:
        sys.exit(EXIT_READY)
    except KeyboardInterrupt:
        _die("interrupted", 130)
    except Exception as exc:
        if program := _slurm_entry_point():
            _spare_the_node(program, f"crashed: {type(exc).__name__}: {exc}")
        raise
