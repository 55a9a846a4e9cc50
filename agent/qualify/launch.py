"""Running a command on a node: here (``local``), in a Slurm job step (``srun``) or over
ssh, always through ``sources.run_command`` (its own session, killed whole at the deadline).

A remote command also runs under coreutils ``timeout`` on the node itself, which signals
the command's whole process group there: killing our local srun or ssh client alone would
leave an MPI launcher and its ranks holding the GPUs on the far side.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Protocol

from ..sources import CommandResult, run_command

VIAS = ("local", "srun", "ssh")
_GRACE_S = 10.0  # the local kill comes this long after the remote timeout's


class ToolRunner(Protocol):
    def __call__(self, node: str, argv: list[str], env: Mapping[str, str],
                 timeout_s: float) -> CommandResult: ...


def remote_argv(via: str, node: str, argv: list[str], env: Mapping[str, str],
                timeout_s: float) -> list[str]:
    """What runs locally to run ``argv`` with ``env`` on ``node`` for ``timeout_s``."""
    guarded = ["timeout", "--kill-after=5", f"{max(1, int(timeout_s))}", *argv]
    if via == "srun":
        export = ",".join(["ALL", *(f"{k}={v}" for k, v in sorted(env.items()))])
        return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
                f"--export={export}", "--kill-on-bad-exit=1", *guarded]
    return ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", node,
            shlex.join(["env", *(f"{k}={v}" for k, v in sorted(env.items())), *guarded])]


def command_runner(via: str) -> ToolRunner:
    """The runner of real commands for ``via``."""
    def run(node: str, argv: list[str], env: Mapping[str, str], timeout_s: float
            ) -> CommandResult:
        if via == "local":
            return run_command(argv, timeout_s, env={**os.environ, **env})
        return run_command(remote_argv(via, node, argv, env, timeout_s), timeout_s + _GRACE_S)
    return run


def missing(result: CommandResult) -> bool:
    """The program is not there: not found locally, or the remote shell/step said so."""
    if result.error is not None:
        return result.error.endswith("not found")
    text = result.stderr[-2000:]
    return result.returncode == 127 or (result.returncode not in (0, None) and (
        "command not found" in text or ("execve(): " in text and "No such file" in text)))
