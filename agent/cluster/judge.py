"""Cluster reports: gather node reports (agents, ssh, srun) or read saved ones, then judge
them with the cluster checks. Each function returns the ClusterReport."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...reports.cluster_checks import judge, settings_from
from ...reports.fleet import gather
from ...reports.fleet.merge import expand, merge_files
from ...reports.model.summary import summarize
from ..base.errors import UsageError
from ..run import session
from ..settings.config import Config
from .nodes import resolve_nodes
from .progress import Progress

if TYPE_CHECKING:
    from ...reports.cluster_checks import ClusterSettings
    from ...reports.model.cluster import ClusterReport
    from ...reports.model.node import NodeReport
    from ..model.slurm_blocks import SlurmBlocks
    from ..settings.config import Config


def cluster_settings(config: Config) -> ClusterSettings:
    """The cluster checks' settings from the config's ``cluster:`` section."""
    return settings_from(config.section("cluster"), f"config {config.path or '(defaults)'}")


def gather_and_judge(config: Config, nodes: Sequence[str], via: str, need: int | None,
                     urls: dict[str, str] | None = None, token: str | None = None,
                     blocks: SlurmBlocks | None = None) -> ClusterReport:
    checks = cluster_settings(config)
    settings = gather.settings_from(config.section("cluster"),
                                    config.section("agent").get("token_file"))
    if token is not None:
        settings = replace(settings, token=token)
    with Progress(len(nodes), f"gathering {len(nodes)} nodes via {via}") as advance:
        if via == "agent":
            result = gather.gather_agent(urls or gather.agent_urls(nodes, settings.agent_url),
                                         settings, advance)
        elif via == "ssh":
            result = gather.gather_ssh(nodes, settings, advance)
        else:
            result = gather.gather_srun(nodes, settings)
    return judge(*result, checks, via=via, need=need, blocks=blocks)


def one_node_report(config: Config, node_report: NodeReport, need: int | None
                    ) -> ClusterReport:
    """This node alone as a cluster report: md/html and ``--exclude-file`` without
    ``--nodes`` render the same way as for a cluster."""
    return judge([summarize(node_report.to_dict())], [], cluster_settings(config),
                 via="local", need=need)


def merge_reports(config_path: Path | None, files: tuple[str, ...], need: int | None
                  ) -> ClusterReport:
    """``report merge``: saved node reports (files, or directories of *.json) judged as a
    cluster; a file that is not a node report is a cluster.reachability finding."""
    settings = cluster_settings(session.load(config_path))
    paths = expand(files)
    if not paths:
        raise UsageError("report merge: no node report files (the directories hold no *.json)")
    summaries, failures = merge_files(paths)
    return judge(summaries, failures, settings, via="files", need=need)


def run_cluster(config_path: Path | None, nodes_arg: str | None, via: str | None,
                forward: dict[str, Any], local_only: dict[str, Any], need: int | None,
                topology: Callable[[Config], SlurmBlocks] | None = None) -> ClusterReport:
    """``run --nodes``: the nodes' reports gathered and judged. ``forward`` are the run
    flags each node applies (ssh, srun); ``local_only`` those that read one node;
    ``topology`` reads Slurm's blocks (agent/slurm, which this layer may not import)."""
    via = via or "agent"
    if via == "local":
        raise UsageError("--via local checks this node only: drop --nodes, or gather with "
                         "--via agent, ssh or srun")
    given = [flag for flag, value in local_only.items() if value is not None]
    if given:
        raise UsageError(f"{given[0]} reads one node; it does not combine with --nodes")
    names = resolve_nodes(nodes_arg)
    if names is None:
        raise UsageError(f"--via {via}: needs --nodes (or SLURM_JOB_NODELIST inside an "
                         "allocation)")
    config = session.load(config_path)
    extra = [f"{flag} {shlex.quote(str(value))}" for flag, value in forward.items()
             if value is not None]
    if extra and via == "agent":
        raise UsageError(f"{extra[0].split()[0]}: agents report at their own settings; it "
                         "applies with --via ssh or srun, where each node runs the checks")
    if extra:
        section = dict(config.section("cluster"))
        section["remote_command"] = " ".join([section["remote_command"], *extra])

        config = Config({**config.data, "cluster": section}, config.path)
    blocks = topology(config) if topology is not None else None
    return gather_and_judge(config, names, via, need, blocks=blocks)
