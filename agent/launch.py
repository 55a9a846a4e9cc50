"""The ``clusterdiag`` console script: Slurm's entry points start before click is imported.

``prolog``, ``epilog`` and ``healthcheck`` run on every node for every job, so their start
is paid cluster-wide (docs/design.md §3: the prolog runs inside Slurm's MessageTimeout). With only
the source flags (docs/design.md §3) on the command line they go straight to ``agent/slurm/``:
no click, and none of the other commands' modules. Anything else (another command,
``--help``, a flag or value this parser does not know) goes to the click CLI, which
parses and answers exactly as before, usage errors included.
"""

from __future__ import annotations

import errno
import gc
import sys

from .base.errors import ClusterdiagError, ExitCode
from .slurm.trouble import spare_the_node

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from typing import NoReturn

SLURM_PROGRAMS = ("prolog", "epilog", "healthcheck")
_PATH_FLAGS = {"--config": "config_path", "--root": "root", "--kernel-log": "kernel_log"}
_TEXT_FLAGS = {"--simulate": "simulate", "--node": "node", "--profile": "profile",
               "--level": "level"}
# checks.core.levels.LEVEL_NAMES, spelled out: the launcher imports nothing it can do without
# (tests/unit/test_prolog_imports.py); tests/unit/test_levels.py keeps the two equal.
LEVEL_NAMES = ("quick", "full")


def slurm_flags(args: list[str]) -> dict[str, object] | None:
    """The source flags as ``Inputs`` fields, or None when click should parse ``args``.
    Paths stay strings: ``pathlib`` is not needed on the prolog's fast path."""
    values: dict[str, object] = {}
    rest = list(args)
    while rest:
        flag, has_value, value = rest.pop(0).partition("=")
        if not has_value:
            if not rest:
                return None
            value = rest.pop(0)
        if not value or (flag == "--level" and value not in LEVEL_NAMES):
            return None
        if flag in _PATH_FLAGS:
            values[_PATH_FLAGS[flag]] = value
        elif flag in _TEXT_FLAGS:
            values[_TEXT_FLAGS[flag]] = value
        else:
            return None
    return values


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


def _dispatch(args: list[str]) -> None:
    if args and args[0] in SLURM_PROGRAMS:
        flags = slurm_flags(args[1:])
        if flags is not None:
            _run_slurm(args[0], flags)
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
