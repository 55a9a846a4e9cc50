"""The ``clusterdiag`` command (docs/design.md §3): one module per command, loaded when it runs.

Exit codes (agent.base.errors.ExitCode): 0 ready, 1 a fail, 2 usage or config, 3 could not
collect at all; 130 interrupted (Ctrl-C). User errors print one line on stderr, never a traceback.

Adding a command: write ``agent/cli/<name>.py`` holding a ``click.command`` (or group) and a
``COMMANDS`` tuple of what it defines, and name each command in ``COMMANDS`` below. Take the
shared flags from ``options.py`` (``source_options``, ``report_options``), turn flags and
config into what a run needs with ``agent.run.session`` and write reports with
``output.py``. A command's module is imported only when that command runs (click's lazy
subcommands: the daemon's aiohttp costs ``run`` nothing), so it imports what it needs at its
top. Put the work itself outside the CLI (the daemon, ``agent/slurm/``, ``agent/cluster/``):
only the entries that start it import the CLI (tests/test_layering.py).
"""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

import click

from ..base.errors import ClusterdiagError, ExitCode
from ..slurm.trouble import spare_the_node

COMMANDS = {"run": "run", "snapshot": "snapshot", "agent": "agent", "prolog": "slurm",
            "epilog": "slurm", "healthcheck": "slurm", "report": "report", "checks": "checks",
            "profiles": "profiles", "topo": "topo", "demo": "demo", "qualify": "qualify",
            "validate": "validate"}
"""Each command and the module of this package that defines it."""
SLURM_PROGRAMS = frozenset(name for name, module in COMMANDS.items() if module == "slurm")


class LazyGroup(click.Group):
    """A group whose commands are imported when asked for (click's documented pattern for
    lazily loaded subcommands): ``clusterdiag run`` imports the run command's module only."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = COMMANDS.get(cmd_name)
        if module is None:
            return None
        defined: tuple[click.Command, ...] = importlib.import_module(
            f"{__name__}.{module}").COMMANDS
        return next(command for command in defined if command.name == cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="clusterdiag", prog_name="clusterdiag")
def cli() -> None:
    """Cluster health and topology diagnostics for GPU training clusters."""


def _die(message: str, code: ExitCode) -> NoReturn:
    click.echo(f"clusterdiag: {message}", err=True)
    sys.exit(code)


# Slurm drains a node on any non-zero exit of these: a wrapper with a bad flag, or a
# crash outside the entry point's own guard (slurm/entry.py execute()), is our trouble,
# not the node's, so it exits 0 with a loud line (docs/design.md §3). fail_closed cannot apply
# here: the command line or config that would say it is what may have failed.
def _slurm_entry_point() -> str | None:
    return sys.argv[1] if SLURM_PROGRAMS & set(sys.argv[1:2]) else None


def main() -> None:
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        if program := _slurm_entry_point():
            _die(f"{program}: usage error above; exiting 0 so Slurm does not drain the node "
                 "for it", ExitCode.READY)
        sys.exit(ExitCode.USAGE)
    except click.Abort:
        _die("aborted", ExitCode.INTERRUPTED)
    except ClusterdiagError as exc:
        if program := _slurm_entry_point():
            spare_the_node(program, str(exc))
        _die(str(exc), exc.exit_code)
    except BrokenPipeError:
        sys.exit(ExitCode.READY)
    except KeyboardInterrupt:
        _die("interrupted", ExitCode.INTERRUPTED)
    except Exception as exc:
        if program := _slurm_entry_point():
            spare_the_node(program, f"crashed: {type(exc).__name__}: {exc}")
        raise
