"""Running a command on a node: here (``local``), in a Slurm job step (``srun``) or over
ssh, always through ``sources.run_command`` (its own session, killed whole at the deadline).

A remote command also runs under coreutils ``timeout`` on the node itself, which signals
the command's whole process group there: killing our local srun or ssh client alone would
leave an MPI launcher and its ranks holding the GPUs on the far side.
"""

from __future__ import annotations

import os
import shlex
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

from ..read.sources import CommandResult, run_command

VIAS = ("local", "srun", "ssh")
_GRACE_S = 10.0  # the local kill comes this long after the remote timeout's
# What a tool may print (stdout and stderr together, every rank's through srun/mpirun):
# all_reduce_perf with NCCL_DEBUG=INFO over an NVL72 rack prints a few MB. A tool printing
# more is stopped and is the tool's error, never read into memory (the cluster report cap).
MAX_OUTPUT_BYTES = 16 * 2**20


class ToolRunner(Protocol):
    def __call__(self, node: str, argv: list[str], env: Mapping[str, str],
                 timeout_s: float) -> CommandResult: ...


class GroupRunner(Protocol):
    """One command as one job over several nodes, ``per_node`` tasks on each: one for
    nccl-tests over MPI (``-g`` GPUs per task), one per GPU for nvbandwidth's multinode
    testcases (each process drives one GPU: its README, "Running it on a cluster")."""

    def __call__(self, nodes: Sequence[str], argv: list[str], env: Mapping[str, str],
                 timeout_s: float, per_node: int = 1) -> CommandResult: ...


def remote_argv(via: str, node: str, argv: list[str], env: Mapping[str, str],
                timeout_s: float) -> list[str]:
    """What runs locally to run ``argv`` with ``env`` on ``node`` for ``timeout_s``."""
    guarded = ["timeout", "--kill-after=5", f"{max(1, int(timeout_s))}", *argv]
    if via == "srun":
        export = ",".join(["ALL", *(f"{k}={v}" for k, v in sorted(env.items()))])
        return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
                f"--export={export}", "--kill-on-bad-exit=1", "--overlap", *guarded]
    return ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", node,
            shlex.join(["env", *(f"{k}={v}" for k, v in sorted(env.items())), *guarded])]


def group_argv(via: str, nodes: Sequence[str], argv: list[str], env: Mapping[str, str],
               timeout_s: float, mpi: str = "pmix", per_node: int = 1) -> list[str]:
    """What runs locally to run ``argv`` as one job of ``per_node`` tasks on each node of
    ``nodes``, ranks filling one node before the next: a job step of the allocation
    (``srun --mpi=pmix``, as nccl-tests' multi-node examples run), or ``mpirun`` over ssh
    (``--host a:n,b:n``, n slots each, and ``--map-by ppr:n:node``, as nvbandwidth's README
    runs its multinode build; Open MPI's mpirun(1), "Specifying Host Nodes" and
    "Mapping"). ``--overlap`` lets the steps of one round share the allocation's nodes (a
    rail's server and client, the pairs of a round)."""
    guarded = ["timeout", "--kill-after=5", f"{max(1, int(timeout_s))}", *argv]
    tasks = len(nodes) * per_node
    if via == "srun":
        export = ",".join(["ALL", *(f"{k}={v}" for k, v in sorted(env.items()))])
        return ["srun", f"--nodes={len(nodes)}", f"--ntasks={tasks}",
                f"--ntasks-per-node={per_node}", f"--nodelist={','.join(nodes)}",
                f"--export={export}", "--kill-on-bad-exit=1", "--overlap", f"--mpi={mpi}",
                *guarded]
    hosts = ",".join(nodes) if per_node == 1 else ",".join(f"{n}:{per_node}" for n in nodes)
    exports = [x for k, v in sorted(env.items()) for x in ("-x", f"{k}={v}")]
    return ["mpirun", "--host", hosts, "-np", str(tasks), "--map-by", f"ppr:{per_node}:node",
            "--bind-to", "numa", *exports, *guarded]


# nccl-tests built with MPI=1 joins its ranks through the MPI library's PMI client; srun
# serves it through one of its MPI plugins, PMIx first, then PMI-2 (Slurm's mpi_guide).
_MPI_PREFERRED = ("pmix", "pmi2")


def mpi_plugins(text: str) -> list[str]:
    """The plugins ``srun --mpi=list`` prints: ``MPI plugin types are...`` then one per
    line, tab-indented (Slurm src/interfaces/mpi.c; the capture of Debian's Slurm 22.05.8 in
    tests/fixtures/real/slurm/srun-mpi-list.txt)."""
    return [line.strip() for line in text.splitlines()
            if line.startswith("\t") and line.strip()]


def choose_mpi(listed: Sequence[str]) -> str | None:
    return next((p for p in _MPI_PREFERRED if p in listed), None)


def srun_mpi(setting: str) -> tuple[str | None, str | None]:
    """(srun's ``--mpi`` plugin, why there is none): ``qualify.srun_mpi``, or for ``auto``
    the first of pmix and pmi2 that this Slurm lists (a Slurm built without PMIx has no
    pmix plugin: ``--mpi=pmix`` fails every job)."""
    if setting != "auto":
        return setting, None
    result = run_command(["srun", "--mpi=list"], 30)
    if result.error is not None or result.returncode != 0:
        why = result.error or (result.stderr.strip() or f"exit {result.returncode}")[-300:]
        return None, f"srun --mpi=list: {why} (set qualify.srun_mpi)"
    listed = mpi_plugins(result.stdout)
    chosen = choose_mpi(listed)
    if chosen is None:
        return None, (f"srun --mpi=list lists {', '.join(listed) or 'no plugin'}: neither "
                      "pmix nor pmi2, which nccl-tests' MPI needs to join its ranks across "
                      "nodes (set qualify.srun_mpi, or --via ssh to use mpirun)")
    return chosen, None


def group_runner(via: str, mpi: str = "auto") -> GroupRunner:
    """The runner of real multi-node jobs for ``via`` (``local`` has one node only);
    ``mpi`` is srun's ``--mpi`` plugin or ``auto`` (config ``qualify.srun_mpi``), asked of
    srun once, at the first job: a site without a usable plugin gets each job's error, and
    its node tests still run."""
    chosen: list[tuple[str | None, str | None]] = []
    lock = threading.Lock()

    def run(nodes: Sequence[str], argv: list[str], env: Mapping[str, str], timeout_s: float,
            per_node: int = 1) -> CommandResult:
        if via == "local":
            return CommandResult(argv, None, error="a test between nodes needs srun or ssh")
        plugin = "pmix"
        if via == "srun":
            with lock:
                if not chosen:
                    chosen.append(srun_mpi(mpi))
            found, why = chosen[0]
            if found is None:
                return CommandResult(argv, None, error=why)
            plugin = found
        return run_command(group_argv(via, nodes, argv, env, timeout_s, plugin, per_node),
                           timeout_s + _GRACE_S, max_bytes=MAX_OUTPUT_BYTES)
    return run


def command_runner(via: str) -> ToolRunner:
    """The runner of real commands for ``via``."""
    def run(node: str, argv: list[str], env: Mapping[str, str], timeout_s: float
            ) -> CommandResult:
        if via == "local":
            return run_command(argv, timeout_s, env={**os.environ, **env},
                               max_bytes=MAX_OUTPUT_BYTES)
        return run_command(remote_argv(via, node, argv, env, timeout_s), timeout_s + _GRACE_S,
                           max_bytes=MAX_OUTPUT_BYTES)
    return run


_LOADER = "error while loading shared libraries: "


def missing(result: CommandResult) -> bool:
    """The program is not there: not found locally, or the remote shell/step said so. A
    program that is there but cannot start (``cannot_start``) is not missing."""
    if result.error is not None:
        return result.error.endswith("not found")
    text = result.stderr[-2000:]
    if cannot_start(result) is not None:
        return False
    return result.returncode == 127 or (result.returncode not in (0, None) and (
        "command not found" in text or ("execve(): " in text and "No such file" in text)))


def cannot_start(result: CommandResult) -> str | None:
    """Why an installed program could not start: the dynamic loader could not find a
    library it needs (exit 127 with ld.so's "error while loading shared libraries: X"), or
    the program may not be run (exit 126, "Permission denied"); None otherwise."""
    text = result.stderr[-2000:]
    if _LOADER in text:
        line = next(x for x in text.splitlines() if _LOADER in x)
        return "a library it needs is missing: " + line.split(_LOADER, 1)[1].strip()[:200]
    if result.returncode == 126 or ("Permission denied" in text and result.returncode == 127):
        return "not permitted to run it (exit 126: " + (text.strip()[-160:] or "no output") + ")"
    return None
