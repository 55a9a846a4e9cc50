"""DCGM's multi-node diagnostic over an NVL72 rack: its prerequisites, its command line and
what its results say of each tray.

``dcgmi mndiag`` runs on one tray (the head node), whose host engine reaches every tray's
host engine and launches mnubergemm over them through MPI (NVIDIA's DCGM user guide,
docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-multinode-diagnostics.html). Each of
its prerequisites is checked first, and one that is missing skips the test with the reason
and what to install or start, never failing a tray:

- DCGM 4.3 or later (4.4 for GB300 NVL): "The multi-node diagnostic module was introduced in
  DCGM 4.3. GB300 NVL support was added in DCGM 4.4" (the multi-node diagnostics reference,
  docs.nvidia.com/datacenter/dcgm/latest/reference/multi-node-diagnostics/index.html), read
  from ``dcgmi --version``, which TCLAP prints as ``<name>  version: <version>``
  (dcgmi/CommandLineParser.cpp:132 gives TCLAP DcgmBuildInfo's version);
- MPI on the head node: mnubergemm "relies on MPI to run" (the user guide), ``mpirun`` on
  its PATH;
- non-interactive SSH from the head node to every tray (the multi-node diagnostics module
  page: "Confirm noninteractive SSH, MPI, and IMEX configuration"), tried with
  ``ssh -o BatchMode=yes -o ConnectTimeout=5 <tray> true``;
- every tray's host engine on its TCP port, 5555 by default (``dcgmi mndiag`` reference:
  "The default TCP port is 5555"), tried from the head node with bash's ``/dev/tcp``
  redirection (bash(1), REDIRECTION);
- at most 72 hosts (``DCGM_MAX_NUM_HOSTS``, dcgmlib/dcgm_structs.h:3603; the reference:
  "One request accepts at most 72 host specifications");
- the GPUs free of compute processes: mnubergemm is an active stress workload, "Drain the
  requested GPUs from production work before running it" (the mnubergemm reference page),
  seen as ``nvidia-smi --query-compute-apps=pid --format=csv,noheader`` printing no process.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from ...checks.core.finding import Action, Finding, Status
from ..read.sources import CommandResult
from .launch import ToolRunner
from .parsers.mndiag import MnDiag

MAX_HOSTS = 72
PORT = 5555
INSTALL = ("install DCGM 4.3 or later (4.4 for GB300) with its multi-node diagnostic and "
           "Open MPI, allow passwordless SSH between the trays, start nv-hostengine on "
           "every tray, and run with the GPUs drained")
_VERSION = re.compile(r"version:\s*(\d+)\.(\d+)(?:\.(\d+))?")
_CHECK_S = 10.0  # each prerequisite's command; ssh's own ConnectTimeout is 5 s
Run = Callable[[str, list[str]], CommandResult]


def dcgm_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of ``dcgmi --version``'s ``version: 4.4.1`` line, or None."""
    found = _VERSION.search(text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def minimum_version(profile_name: str) -> tuple[int, int]:
    return (4, 4) if profile_name.startswith("gb300") else (4, 3)


def ssh_argv(tray: str) -> list[str]:
    return ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", tray, "true"]


# The tray is bash's $1, never part of the script: a node name is no shell code.
PORT_SCRIPT = 'exec 3<>"/dev/tcp/$1/$2"'


def port_argv(tray: str) -> list[str]:
    return ["bash", "-c", PORT_SCRIPT, "bash", tray, str(PORT)]


COMPUTE_APPS = ["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"]


def command(program: str, trays: Sequence[str]) -> list[str]:
    """``dcgmi mndiag`` over ``trays``, every GPU of each, JSON: the host list is separated
    by semicolons, a host alone meaning all its GPUs (CommandLineParser.cpp:1663-1700)."""
    return [program, "mndiag", "--run", "mnubergemm", "--hostList", ";".join(trays), "--json"]


def _why(result: CommandResult) -> str:
    said = (result.error or result.stderr or result.stdout or "").strip()
    return " ".join(said.split())[:200] or f"exit {result.returncode}"


def _failing(results: Mapping[str, CommandResult], ok: Callable[[CommandResult], bool]
             ) -> list[str]:
    return sorted(tray for tray, result in results.items() if not ok(result))


def prerequisites(head: str, trays: Sequence[str], program: str, profile_name: str,
                  runner: ToolRunner) -> str | None:
    """Why the rack cannot run the diagnostic (the first prerequisite missing), or None."""
    if len(trays) > MAX_HOSTS:
        return (f"{len(trays)} trays, over dcgmi mndiag's {MAX_HOSTS} hosts")

    def run(node: str, argv: list[str]) -> CommandResult:
        return runner(node, argv, {}, _CHECK_S)

    version = run(head, [program, "--version"])
    if version.error is not None or version.returncode != 0:
        return (f"dcgmi --version on {head}: {_why(version)}")
    found = dcgm_version(version.stdout)
    need = minimum_version(profile_name)
    if found is None or found < need:
        said = "no version" if found is None else ".".join(map(str, found))
        return (f"DCGM {said} on {head}; dcgmi mndiag needs {need[0]}.{need[1]} or "
                     f"later on {profile_name}")
    mpi = run(head, ["which", "mpirun"])
    if mpi.returncode != 0 or not mpi.stdout.strip():
        return (f"no mpirun on {head}'s PATH (mnubergemm runs under MPI)")
    for what, argv, ok in (
            ("ssh (BatchMode) from " + head, ssh_argv, lambda r: r.returncode == 0),
            (f"nv-hostengine's port {PORT} from " + head, port_argv,
             lambda r: r.returncode == 0)):
        answers = _fan_out(head, trays, argv, run)
        bad = _failing(answers, ok)
        if bad:
            return (f"{what} fails to {', '.join(bad[:4])}"
                         f"{' …' if len(bad) > 4 else ''}: {_why(answers[bad[0]])}")
    busy = {t: r for t, r in _fan_out(None, trays, lambda t: COMPUTE_APPS, run).items()
            if r.error is not None or r.returncode != 0 or r.stdout.strip()}
    if busy:
        first = sorted(busy)[0]
        return (f"GPUs in use (compute processes) on {', '.join(sorted(busy)[:4])}: "
                     f"{_why(busy[first])}")
    return None


def _fan_out(head: str | None, trays: Sequence[str], argv: Callable[[str], list[str]],
             run: Run) -> dict[str, CommandResult]:
    """One command per tray, all at once: from the head node (``head``), or on each tray."""
    with ThreadPoolExecutor(max(1, min(len(trays), 32))) as pool:
        answers = pool.map(lambda t: run(head or t, argv(t)), trays)
        return dict(zip(trays, answers, strict=True))


def _unjudged(said: Mapping[int, set[str]], asked: set[int]) -> list[str]:
    """Each GPU of the tray with no Pass, Warn or Fail of its own: ``Skip``, ``Not Run`` or
    no result at all for a GPU its host listed."""
    return [f"gpu{gpu} {'/'.join(sorted(said.get(gpu, ()))) or 'no result'}"
            for gpu in sorted(set(said) | asked)
            if not said.get(gpu, set()) & {"Pass", "Warn", "Fail"}]


def findings(result: MnDiag, trays: Iterable[str]) -> dict[str, list[Finding]]:
    """A tray's GPU that mnubergemm failed is a ``fail`` naming the GPU and mnubergemm's
    words; one it warned on is a ``warn``. A GPU skipped, not run or without a result leaves
    the tray unjudged (a ``skip`` naming the GPUs), never passed: a tray passes only when
    every GPU it has (those its host listed, and those with a result) passed. A host the
    tool named that is not one of the rack's trays is ignored (the host list is ours)."""
    wanted = set(trays)
    said: dict[str, dict[int, set[str]]] = {}
    words: dict[tuple[str, int], list[str]] = {}
    for r in result.results:
        if r.host in wanted:
            said.setdefault(r.host, {}).setdefault(r.gpu, set()).add(r.status)
            words.setdefault((r.host, r.gpu), []).extend(r.messages)
    out: dict[str, list[Finding]] = {}
    listed = {host for host, gpus in result.gpus.items() if gpus}
    for tray in sorted(wanted & (set(said) | listed)):
        own = out.setdefault(tray, [])
        statuses = said.get(tray, {})
        for gpu, seen in sorted(statuses.items()):
            observed = "; ".join(words[tray, gpu])
            if "Fail" in seen:
                own.append(Finding(
                    Status.FAIL, f"gpu{gpu}", "dcgmi mndiag (mnubergemm) failed the GPU",
                    observed or "Fail", "Pass", Action.DRAIN, "qualify.rack"))
            elif "Warn" in seen:
                own.append(Finding(
                    Status.WARN, f"gpu{gpu}", "dcgmi mndiag (mnubergemm) warned on the GPU",
                    observed or "Warn", "Pass", Action.INVESTIGATE, "qualify.rack"))
        unjudged = _unjudged(statuses, result.gpus.get(tray, set()))
        if unjudged:
            own.append(Finding(
                Status.SKIP, "node", "dcgmi mndiag (mnubergemm) did not judge every GPU",
                ", ".join(unjudged), "Pass", Action.NONE, "qualify.rack"))
        elif not own:
            own.append(Finding(
                Status.PASS, "node", "dcgmi mndiag (mnubergemm) passed every GPU",
                ", ".join(f"gpu{g}" for g in sorted(statuses)), None, Action.NONE, "qualify.rack"))
    return out
