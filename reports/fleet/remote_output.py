"""What remote commands print (``run --nodes --via ssh|srun``), read within a byte cap per
node and the gather's deadline.

A remote command is hostile input like an agent's answer (reports/fleet/gather.py): one that
drips a byte at a time would hold the run forever, one that writes gigabytes would take
the gatherer's memory. So each node's output is counted as it is read, never past
``limit`` bytes (stdout and stderr together: the same cap as an agent's report, 16 MiB),
and whatever still runs at the gather's deadline is stopped. Every command runs in a
session of its own and is stopped by SIGKILL to its whole process group: an ``ssh`` or
``srun`` wrapper's children (a ControlMaster, a task launcher) die with it instead of
holding our pipes. A node cut off is a reason (too large, no answer by the deadline),
never a crash, and the other nodes' reports are kept.

ssh goes through ClusterShell, which keeps its fan-out, per-node timeout and ssh options;
its exec-based workers (ssh, rsh, exec) get clients that read raw chunks into these
bounds instead of splitting lines into its message tree. Under a ClusterShell gateway tree
(topology.conf) the gateways relay the output: there only the overall deadline applies.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ClusterShell.Engine.Engine import E_READ, E_WRITE
from ClusterShell.Worker.Exec import ExecClient, ExecWorker
from ClusterShell.Worker.fastsubprocess import PIPE, STDOUT, Popen

ERR_TAIL = 4096  # of stderr, what is kept for the reason a command gave no report


@dataclass
class Bounds:
    """Every node's output so far, and who was cut off and why."""
    limit: int
    deadline_s: float
    out: dict[str, bytearray] = field(default_factory=lambda: defaultdict(bytearray))
    err: dict[str, bytes] = field(default_factory=dict)
    size: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    cut: dict[str, str] = field(default_factory=dict)  # node -> why it was stopped
    exited: dict[str, int] = field(default_factory=dict)  # node -> exit status

    def take(self, node: str, data: bytes, stderr: bool) -> bool:
        """Count ``data`` against the node's cap and keep it; False once it is over."""
        self.size[node] += len(data)
        if self.size[node] > self.limit:
            self.cut.setdefault(node, f"report larger than {self.limit} bytes")
            return False
        if stderr:
            self.err[node] = (self.err.get(node, b"") + data)[-ERR_TAIL:]
        else:
            self.out[node] += data
        return True

    def missed(self) -> str:
        return f"no answer within the gather's deadline ({self.deadline_s:g} s)"


def kill_group(pid: int | None) -> None:
    """SIGKILL the process group ``pid`` leads (a command in a session of its own)."""
    if pid:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


# -- ssh: ClusterShell clients that read into the bounds ---------------------------------------

def bounded_worker(base: Any, bounds: Bounds) -> Any:
    """A subclass of the ClusterShell worker class ``base`` whose clients run their
    command in a session of its own, read into ``bounds`` and are stopped past the cap;
    None when ``base`` is not one of ClusterShell's exec-based workers."""
    shell_class = getattr(base, "SHELL_CLASS", None)
    if not (isinstance(base, type) and issubclass(base, ExecWorker)
            and isinstance(shell_class, type) and issubclass(shell_class, ExecClient)):
        return None
    client = type(f"Bounded{shell_class.__name__}", (_BoundedClient, shell_class),
                  {"bounds": bounds})
    return type(f"Bounded{base.__name__}", (base,), {"SHELL_CLASS": client})


class _BoundedClient:
    """Mixed in before a ClusterShell ExecClient subclass (``bounded_worker``)."""
    bounds: Bounds
    key: Any
    popen: Any
    worker: Any
    streams: Any
    _stderr: bool

    def _exec_nonblock(self, commandlist: Any, shell: bool = False,
                       env: dict[str, str] | None = None) -> Any:
        """ClusterShell's own (EngineClient._exec_nonblock), in a session of its own."""
        full_env = {**os.environ, **env} if env else None
        proc = Popen(commandlist, bufsize=0, stdin=PIPE, stdout=PIPE,
                     stderr=PIPE if self._stderr else STDOUT, shell=shell, env=full_env,
                     preexec_fn=os.setsid)
        if self._stderr:
            self.streams.set_stream(self.worker.SNAME_STDERR, proc.stderr, E_READ)
        self.streams.set_stream(self.worker.SNAME_STDOUT, proc.stdout, E_READ)
        self.streams.set_stream(self.worker.SNAME_STDIN, proc.stdin, E_WRITE, retain=False)
        return proc

    def _handle_read(self, sname: str) -> None:
        """A raw chunk into the bounds (never split into lines: a gigabyte with no newline
        would grow ClusterShell's line buffer); past the cap the command is stopped."""
        data = self._read(sname)  # type: ignore[attr-defined]  # EngineClientEOF at the end
        node = str(self.key)
        if not self.bounds.take(node, data, sname == self.worker.SNAME_STDERR):
            self.abort()  # type: ignore[attr-defined]

    def _close(self, abort: bool, timeout: bool) -> None:
        if abort and self.popen is not None:
            kill_group(self.popen.pid)
        super()._close(abort, timeout)  # type: ignore[misc]


# -- srun: one process for every node, its output labelled by task ------------------------------

def read_srun(argv: Sequence[str], nodes: Sequence[str], bounds: Bounds,
              timeout_s: float) -> tuple[dict[str, bytes], str, str | None]:
    """Run srun (``--label``, each task printing its node name first) and read its output
    into ``bounds`` per node until it ends, ``timeout_s`` passes, or the output of every
    node together passes their caps (a node past its own cap is only dropped: srun runs
    them all). Returns node -> output, srun's last message, and why it was stopped early."""
    try:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        return {}, f"srun: {exc.strerror or exc}", None
    assert proc.stdout is not None
    assert proc.stderr is not None
    labels = _Labels(bounds, len(nodes))
    stopped = None
    until = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ, False)
        selector.register(proc.stderr, selectors.EVENT_READ, True)
        while selector.get_map() and stopped is None:
            left = until - time.monotonic()
            if left <= 0:
                stopped = f"srun gave no complete answer within {timeout_s:g} s"
                break
            for key, _ in selector.select(min(left, 1.0)):
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif not (labels.stderr(chunk) if key.data else labels.feed(chunk)):
                    stopped = f"srun's output passed {labels.total_limit} bytes"
    kill_group(proc.pid)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    labels.finish()
    why = labels.err.decode("utf-8", errors="replace").strip().splitlines()
    return labels.by_node(), why[-1] if why else f"srun exit code {proc.returncode}", stopped


@dataclass
class _Labels:
    """``--label`` output (``RANK: line``) parsed as it streams: each task's first line is
    its node's name, the rest is that node's report, counted against its cap."""
    bounds: Bounds
    nodes: int
    pending: bytearray = field(default_factory=bytearray)
    node_of: dict[str, str] = field(default_factory=dict)
    total: int = 0
    skipping: bool = False
    err: bytes = b""

    @property
    def total_limit(self) -> int:
        return (self.nodes + 1) * self.bounds.limit

    def feed(self, chunk: bytes) -> bool:
        """False once srun's output as a whole is past every node's cap."""
        self.total += len(chunk)
        if self.total > self.total_limit:
            return False
        if self.skipping:  # the rest of a line already past its node's cap
            _, newline, chunk = chunk.partition(b"\n")
            if not newline:
                return True
            self.skipping = False
        if b"\n" in chunk:  # only new bytes are searched: a long line costs linear time
            *complete, last = (bytes(self.pending) + chunk).split(b"\n")
            for line in complete:
                self._line(line)
            self.pending = bytearray(last)
        else:
            self.pending += chunk
        if len(self.pending) > self.bounds.limit:  # one line longer than a whole report
            self._line(bytes(self.pending))
            self.pending, self.skipping = bytearray(), True
        return True

    def _line(self, line: bytes) -> None:
        rank, sep, rest = line.partition(b": ")
        rank_text = rank.strip().decode("ascii", errors="replace")
        if not (sep and rank_text.isdigit()):
            return
        node = self.node_of.get(rank_text)
        if node is None:
            self.node_of[rank_text] = rest.strip().decode("utf-8", errors="replace")
        elif node not in self.bounds.cut:
            self.bounds.take(node, rest + b"\n", stderr=False)

    def stderr(self, chunk: bytes) -> bool:
        """srun's own messages: the tail kept, counted with the rest."""
        self.total += len(chunk)
        self.err = (self.err + chunk)[-ERR_TAIL:]
        return self.total <= self.total_limit

    def finish(self) -> None:
        if self.pending and not self.skipping:
            self._line(bytes(self.pending))
        self.pending = bytearray()

    def by_node(self) -> dict[str, bytes]:
        return {node: bytes(self.bounds.out[node]) for node in self.node_of.values()
                if node not in self.bounds.cut}
