"""``clusterdiag validate``: return a drained node to service on evidence (agent/qualify/
validate.py), or let a node held for repair back into validation (``--release``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..base.errors import UsageError
from ..qualify.validate import Request, validate
from ..run import session


@click.command("validate")
@click.option("--node", default=None, metavar="NAME",
              help="The node's name (default: this host; a node of --simulate).")
@click.option("--simulate", default=None, metavar="SPEC",
              help="Validate a simulated node: its checks and tools are stand-ins.")
@click.option("--seed", type=int, default=0, help="Noise seed of the simulated tools.")
@click.option("--release", default=None, metavar="NAME",
              help="Let node NAME, held for repair, back into validation, and validate it.")
@click.option("--state-dir", "state_dir", type=click.Path(path_type=Path), default=None,
              help="The agent's state directory (default agent.state_dir).")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="Config file (default /etc/clusterdiag/config.yaml when present).")
@click.option("--root", default=None, metavar="DIR",
              help="Read the node's files under DIR (as the health check that started it).")
# The validation lock the health check took and handed down (agent/health/lock.py).
@click.option("--lock-fd", "lock_fd", type=click.IntRange(0), default=None, hidden=True)
def validate_command(node: str | None, simulate: str | None, seed: int, release: str | None,
                     state_dir: Path | None, config_path: Path | None, root: str | None,
                     lock_fd: int | None) -> None:
    """Run the validation the node's open incident calls for (checks explain shows each
    check's) and say the outcome: exit 0 validated (or nothing to validate), 1 failed
    with its figure (or held for repair, or still in its hold-down), 3 could not run."""
    if release is not None and node not in (None, release):
        raise UsageError(f"--release {release} and --node {node}: name one node")
    config = session.load(config_path)
    where = state_dir or Path(config.section("agent")["state_dir"])
    answer = validate(Request(where, release or node, simulate, seed, release is not None,
                              root=root, lock_fd=lock_fd), config)
    click.echo(answer.message)
    sys.exit(answer.exit_code)


COMMANDS = (validate_command,)
