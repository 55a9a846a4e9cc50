"""The ``clusterdiag`` console script: Slurm's entry points and the agent start before click.

``prolog``, ``epilog`` and ``healthcheck`` run on every node for every job, so their start
is paid cluster-wide (docs/design.md §3: the prolog runs inside Slurm's MessageTimeout). With only
the source flags (docs/design.md §3) on the command line they go straight to ``agent/slurm/``:
no click, and none of the other commands' modules. ``agent`` is the daemon that stays
resident on every node: with only the flags its unit passes (the source flags, ``--listen``,
``--interval``, ``--state-dir``) it goes straight to ``agent/daemon/``, and click's ~0.9 MiB
never loads into it (docs/agent.md, Memory). Anything else (another command, ``--help``,
``agent --clear``, a flag or value this parser does not know) goes to the click CLI, which
parses and answers exactly as before, usage errors included.
"""

from __future__ import annotations

import errno
import gc
import os
import sys

from .base.errors import ClusterdiagError, ExitCode
from .slurm.trouble import spare_the_node

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from typing import NoReturn

SLURM_PROGRAMS = ("prolog", "epilog", "healthcheck")
AGENT = "agent"
# Each flag and the keyword its value is passed by: the parameter names of the click options
# (agent/cli/options.py source_options, agent/cli/agent.py), which are those of
# slurm.entry.Inputs and daemon.main.start; tests/unit/test_launch_agent.py keeps them equal.
SOURCE_FLAGS = {"--config": "config_path", "--root": "root", "--kernel-log": "kernel_log",
                "--simulate": "simulate", "--node": "node", "--profile": "profile",
                "--level": "level"}
AGENT_FLAGS = {**SOURCE_FLAGS, "--listen": "listen", "--interval": "interval",
               "--state-dir": "state_path"}
AGENT_PATHS = frozenset({"config_path", "root", "kernel_log", "state_path"})
# checks.core.levels.LEVEL_NAMES, spelled out: the launcher imports nothing it can do without
# (tests/unit/test_prolog_imports.py); tests/unit/test_levels.py keeps the two equal.
LEVEL_NAMES = ("quick", "full")


def _flags(args: list[str], known: dict[str, str]) -> dict[str, str] | None:
    """``--flag VALUE`` and ``--flag=VALUE`` of the ``known`` flags, by keyword (the last
    of a repeated flag wins, as in click); None for anything else, an empty value included."""
    values: dict[str, str] = {}
    rest = list(args)
    while rest:
        flag, has_value, value = rest.pop(0).partition("=")
        if not has_value:
            if not rest:
                return None
            value = rest.pop(0)
        if not value or flag not in known or (flag == "--level" and value not in LEVEL_NAMES):
            return None
        values[known[flag]] = value
    return values


def slurm_flags(args: list[str]) -> dict[str, object] | None:
    """The source flags as ``Inputs`` fields, or None when click should parse ``args``.
    Paths stay strings: ``pathlib`` is not needed on the prolog's fast path."""
    return _flags(args, SOURCE_FLAGS)  # type: ignore[return-value]


def _readable_or_absent(path: str) -> bool:
    """What ``click.Path()`` accepts with its defaults (``readable=True``, ``exists=False``):
    a path that does not exist, or one this process may read (click/types.py,
    ``Path.convert``: ``os.stat``, then ``os.access(rv, os.R_OK)``)."""
    try:
        os.stat(path)
    except OSError:
        return True
    return os.access(path, os.R_OK)


def agent_flags(args: list[str]) -> dict[str, object] | None:
    """The agent's flags as ``daemon.main.start`` keywords, converted as click converts them
    (``click.Path(path_type=Path)``, ``type=float``: ``float(value)``, click/types.py), or
    None when click should parse ``args`` and say what is wrong with them."""
    values = _flags(args, AGENT_FLAGS)
    if values is None or not all(_readable_or_absent(values[k]) for k in AGENT_PATHS & set(values)):
        return None
    from pathlib import Path  # the daemon imports it anyway; the prolog's path does not

    flags: dict[str, object] = dict.fromkeys(AGENT_FLAGS.values())
    flags.update({k: Path(v) if k in AGENT_PATHS else v for k, v in values.items()})
    if "interval" in values:
        try:
            flags["interval"] = float(values["interval"])
        except ValueError:
            return None
    return flags


def _run_slurm(program: str, flags: dict[str, object]) -> NoReturn:
    if program == "prolog":
        # The prolog runs on every node for every job and exits within its budget: the cyclic
        # collector's passes over what its imports allocate (some two dozen, ~10 % of its run
        # with an agent report, bench/prolog_time.py) buy nothing there. Reference counting
        # still frees every object not in a cycle; the few cycles (classes, caught
        # exceptions) are freed when it exits. gc.disable(): "Disable automatic garbage
        # collection" (docs.python.org/3/library/gc.html); epilog and healthcheck keep it.
        gc.disable()
    try:
        from .slurm.entry import Inputs  # each Slurm program loads only its own entry point

        inputs = Inputs(**flags)  # type: ignore[arg-type]
        if program == "prolog":
            from .slurm import prolog as chosen  # the program's own module, as above
        elif program == "epilog":
            from .slurm import epilog as chosen  # type: ignore[no-redef]
        else:
            from .slurm import healthcheck as chosen  # type: ignore[no-redef]
        code = chosen.main(inputs)
    except ClusterdiagError as exc:
        spare_the_node(program, str(exc))
    except Exception as exc:  # noqa: BLE001 - a crash here must not drain the node
        spare_the_node(program, f"crashed: {type(exc).__name__}: {exc}")
    sys.exit(code)


def _die(message: str, code: int, blank: bool = False) -> NoReturn:
    """One line on stderr as the click CLI writes it (``click.echo(err=True)``, which drops
    terminal escape sequences when stderr is not a terminal), after a blank one when
    ``blank``, and exit with ``code``: the agent's start errors read the same either way.
    click loads here only when the agent exits."""
    import click  # the line is the last thing the process does: click costs no resident memory

    if blank:
        click.echo("", err=True)
    click.echo(f"clusterdiag: {message}", err=True)
    sys.exit(code)


def _run_agent(flags: dict[str, object]) -> NoReturn:
    """``daemon.main.start`` with the answers the click CLI gives around it (agent/cli/
    __init__.py ``main``): a ClusterdiagError is one line and its exit code; an interrupt
    before the daemon's own signal handlers is a blank line (click/core.py
    ``BaseCommand.main``: it closes the terminal's ``^C`` echo) and ``aborted``, exit 130.
    The daemon writes only through ``logging``, whose handlers never raise on a closed
    stream (``Handler.handleError``), so click's quiet exit on a broken pipe has no
    counterpart here."""
    try:
        from .daemon import openssl  # before anything the daemon imports loads OpenSSL

        openssl.keep_out_unless_tls(flags["config_path"])  # type: ignore[arg-type]
        from .daemon import main as daemon  # the daemon's modules only when the agent runs

        code = daemon.start(**flags)  # type: ignore[arg-type]
    except ClusterdiagError as exc:
        _die(str(exc), exc.exit_code)
    except (EOFError, KeyboardInterrupt):
        _die("aborted", ExitCode.INTERRUPTED, blank=True)
    sys.exit(code)


def _dispatch(args: list[str]) -> None:
    if args and args[0] in SLURM_PROGRAMS:
        flags = slurm_flags(args[1:])
        if flags is not None:
            _run_slurm(args[0], flags)
    if args and args[0] == AGENT and (agent := agent_flags(args[1:])) is not None:
        _run_agent(agent)
    from .cli import main as cli_main  # click and every command only when no Slurm program runs

    cli_main()


def _starved(args: list[str], trouble: str) -> NoReturn:
    """The process itself ran out (descriptors, memory): clusterdiag's own trouble, one
    line and exit 3 (docs/design.md §3), or exit 0 for a Slurm program so that no node is
    drained for it. Printing needs no new descriptor: stderr is open already."""
    if args and args[0] in SLURM_PROGRAMS:
        spare_the_node(args[0], trouble)
    print(f"clusterdiag: {trouble}", file=sys.stderr)
    sys.exit(ExitCode.COLLECT)


def main() -> None:
    """The console script. Running out of file descriptors fails whichever ``open`` comes
    next, the import of a module included (the CLI's modules load lazily, below), so it is
    caught here, outside everything that could import or open anything."""
    args = sys.argv[1:]
    try:
        _dispatch(args)
    except OSError as exc:
        # EMFILE: this process's RLIMIT_NOFILE; ENFILE: the system's file table
        # (open(2), ERRORS).
        if exc.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        _starved(args, f"out of file descriptors ({exc.strerror}); raise the limit "
                       "(ulimit -n) or close what holds them")
    except MemoryError:
        _starved(args, "out of memory")
