"""The commands collectors run, answered from a simulated node's state: systemctl's unit
states, iproute2's dcb, timedatectl, nvidia-imex-ctl on NVL72 trays, journalctl for
the previous boot's kernel log, and nccl-tests' all_reduce_perf where installed."""

from __future__ import annotations

from ...read.sources import CommandResult, CommandRunner
from ..state.hardware import SimNode
from .dcb import dcb
from .imex import imex_ctl
from .journal import journalctl
from .nccl import allreduce_output


def command_runner(node: SimNode) -> CommandRunner:
    """Answers the commands collectors run, from the simulated state."""

    def run(argv: list[str], timeout_s: float) -> CommandResult:
        program = argv[0].rsplit("/", 1)[-1]
        if program == "systemctl" and "show" in argv:
            units = [a for a in argv[1:] if not a.startswith("-") and a != "show"]
            blocks = []
            for unit in units:
                state = node.services.get(unit)
                load = "loaded" if state is not None else "not-found"
                blocks.append(f"Id={unit}\nActiveState={state or 'inactive'}\n"
                              f"SubState={'running' if state == 'active' else 'dead'}\n"
                              f"LoadState={load}\n")
            return CommandResult(argv, 0, "\n".join(blocks))
        if program == "dcb":
            return dcb(node, argv)
        if program == "nvidia-imex-ctl":
            return imex_ctl(node, argv)
        if program == "journalctl":
            return journalctl(node, argv, timeout_s)
        if program == "timedatectl":
            return CommandResult(argv, 0, "yes\n")
        if program == "all_reduce_perf" and allreduce_output(node) is not None:
            return CommandResult(argv, 0, allreduce_output(node) or "")
        return CommandResult(argv, None, error=f"{program}: not found")

    return run
