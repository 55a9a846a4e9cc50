"""The ways a node is read, bundled so that each can be handed in.

Real hardware and the simulator differ only here: the filesystem root, the kernel log,
the pynvml module, the command runner, the environment and the library finder. No
collector or check knows which it got.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from ..base.safefile import open_regular_fd
from ..model.record import field, record

if TYPE_CHECKING:
    import subprocess


@record
class CommandResult:
    """What a system tool answered, or why it did not (``error``): a collector records
    the reason instead of raising, so one tool costs one value."""
    argv: list[str]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    error: str | None = None  # not found, timed out, ...
    stray: int = 0  # processes it left behind, still running when it exited: killed


class CommandRunner(Protocol):
    def __call__(self, argv: list[str], timeout_s: float) -> CommandResult: ...


# Prologs run with no PATH: look where distributions install system tools.
_SYSTEM_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def find_program(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    path = (environ or os.environ).get("PATH", "")
    for directory in [*path.split(os.pathsep), *_SYSTEM_DIRS]:
        candidate = os.path.join(directory, name)
        if directory and os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return candidate
    return None


def run_command(argv: list[str], timeout_s: float,
                env: Mapping[str, str] | None = None,
                max_bytes: int | None = None) -> CommandResult:
    """Run a program (never a shell) with a deadline, in its own session.

    At the deadline the whole session is killed, not just the child: a wrapper script
    (an MPI launcher around all_reduce_perf, a site's scontrol) has children of its own,
    and one that survived would keep the GPUs busy and our pipes open. The pipes are then
    closed unread, since a grandchild that left the session may still hold them. With
    ``max_bytes`` the output (stdout and stderr together) is read no further than that:
    a program printing more is killed the same way and is an error saying so.
    """
    program = find_program(argv[0])
    if program is None:
        return CommandResult(argv, None, error=f"{argv[0]}: not found")
    import subprocess  # only the sources that run a tool: the prolog's PCI and NVML do not

    try:
        with _RUNNING_LOCK:  # never seen as an orphan by another thread's reap_orphans
            proc = subprocess.Popen(
                [program, *argv[1:]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL, text=max_bytes is None, errors="replace"
                if max_bytes is None else None, start_new_session=True, env=env)
            _RUNNING.add(proc.pid)
    except OSError as exc:
        return CommandResult(argv, None, error=f"{argv[0]}: {exc.strerror or exc}")
    try:
        result = _communicate(proc, argv, timeout_s) if max_bytes is None else \
            _read_bounded(proc, argv, timeout_s, max_bytes)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.discard(proc.pid)
    if _SUBREAPER:
        result.stray += reap_orphans()
    return result


def _communicate(proc: subprocess.Popen[str], argv: list[str], timeout_s: float
                 ) -> CommandResult:
    import subprocess  # loaded by run_command, the only caller: a dict lookup here

    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return CommandResult(argv, None, error=f"{argv[0]}: no answer within {timeout_s:g} s")
    return CommandResult(argv, proc.returncode, out, err)


def _kill(proc: subprocess.Popen[Any]) -> None:
    """SIGKILL the command's session, reap it, close its pipes unread."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


# After the program exits, how long what it printed last may still be in the pipes.
_DRAIN_S = 1.0
# The bounded runs under way (their pids), and whether this process adopts the orphans of
# what it runs (become_subreaper): then whatever a finished program left behind, even one
# that called setsid and closed its output, becomes our child and is found.
_RUNNING: set[int] = set()
_RUNNING_LOCK = threading.Lock()
_SUBREAPER = False


def become_subreaper() -> bool:
    """Adopt the orphans of every program run from now on (Linux prctl
    PR_SET_CHILD_SUBREAPER, proc(5)/prctl(2)); False where the kernel refuses."""
    global _SUBREAPER
    import ctypes  # only the commands that run tools for minutes (qualify) ask

    libc = ctypes.CDLL(None, use_errno=True)
    _SUBREAPER = bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # PR_SET_CHILD_SUBREAPER
    return _SUBREAPER


def reap_orphans() -> int:
    """SIGKILL (and reap) every process adopted as an orphan: a child of ours that no run
    under way started; the number killed."""
    me = str(os.getpid())
    adopted = []
    with contextlib.suppress(OSError):
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            with contextlib.suppress(OSError, IndexError):
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                if stat[1] == me and stat[0] != "Z":
                    adopted.append(pid)
    with _RUNNING_LOCK:
        orphans = [pid for pid in adopted if pid not in _RUNNING]
    for pid in orphans:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    return len(orphans)


def _read_bounded(proc: subprocess.Popen[bytes], argv: list[str], timeout_s: float,
                  max_bytes: int) -> CommandResult:
    """Both pipes read as they fill, until they close, the deadline or ``max_bytes``; and
    once the program has exited, for ``_DRAIN_S`` more at most: a process it left behind
    (one that called setsid keeps no session of ours) holding a pipe open would otherwise
    make a finished run look hung. Such leftovers are killed (``kill_strays``) and counted
    in ``stray``; the program's own exit status and output are the result."""
    import selectors  # loaded with subprocess, by run_command, the only caller
    import subprocess  # loaded by run_command, the only caller

    deadline = time.monotonic() + timeout_s
    chunks: dict[int, list[bytes]] = {1: [], 2: []}
    size = 0
    exited_at: float | None = None
    with selectors.DefaultSelector() as selector:
        for number, pipe in ((1, proc.stdout), (2, proc.stderr)):
            if pipe is not None:
                selector.register(pipe, selectors.EVENT_READ, number)
        while selector.get_map():
            now = time.monotonic()
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _DRAIN_S:
                break
            left = deadline - now
            if left <= 0:
                _kill(proc)
                return CommandResult(argv, None,
                                     error=f"{argv[0]}: no answer within {timeout_s:g} s")
            for key, _ in selector.select(min(left, 0.25)):
                data = os.read(key.fd, 65536)
                if not data:
                    selector.unregister(key.fileobj)
                    continue
                size += len(data)
                if size > max_bytes:
                    _kill(proc)
                    return CommandResult(argv, None, error=f"{argv[0]}: printed more than "
                                         f"{max_bytes} bytes; stopped")
                chunks[key.data].append(data)
        held = [key.fd for key in selector.get_map().values()]
    stray = kill_strays(proc.pid, held) if held else 0
    try:
        proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill(proc)
        return CommandResult(argv, None, error=f"{argv[0]}: no answer within {timeout_s:g} s")
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    out, err = (b"".join(chunks[n]).decode(errors="replace") for n in (1, 2))
    return CommandResult(argv, proc.returncode, out, err, stray=stray)


def kill_strays(session: int, pipes: list[int]) -> int:
    """SIGKILL what a finished program left running: its session, and every process that
    still holds one of ``pipes`` (its stdout and stderr) open, wherever it moved to; the
    number of processes found."""
    inodes = {f"pipe:[{os.fstat(fd).st_ino}]" for fd in pipes}
    found = set()
    with contextlib.suppress(OSError):
        for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
            with contextlib.suppress(OSError):
                if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes
                       for fd in os.listdir(f"/proc/{pid}/fd")):
                    found.add(pid)
    found.discard(os.getpid())
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(session, signal.SIGKILL)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(found)


# What a library lookup or a version probe found, with the identity of the file it
# depended on (inode, size, mtime): valid until that file changes.
FileKey = tuple[int, int, int]
_LD_CACHE = "/etc/ld.so.cache"
_libraries: dict[str, tuple[FileKey | None, str | None]] = {}
_versions: dict[str, tuple[FileKey, int]] = {}


def file_key(path: str) -> FileKey | None:
    """The identity of ``path`` (through symlinks); None when it cannot be looked at."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def find_library(name: str) -> str | None:
    """``ctypes.util.find_library``, remembered until /etc/ld.so.cache changes: it runs
    ``ldconfig -p`` (and gcc and ld where that has no answer) on every call, which the
    agent would otherwise pay on every collection."""
    key = file_key(_LD_CACHE)
    hit = _libraries.get(name)
    if hit is not None and hit[0] == key:
        return hit[1]
    import ctypes.util  # ctypes only for a library search the cache cannot answer

    found = ctypes.util.find_library(name)
    _libraries[name] = (key, found)
    return found


# Loads each library in a child process: a library's static initialisers run on load and
# may hang or crash, and the agent must not keep a 400 MB library mapped for one number.
_NCCL_PROBE = """
import ctypes, json, sys
out = {}
for path in sys.argv[1:]:
    try:
        lib = ctypes.CDLL(path)
        code = ctypes.c_int()
        lib.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        lib.ncclGetVersion.restype = ctypes.c_int
        rc = lib.ncclGetVersion(ctypes.byref(code))
        out[path] = [code.value, None] if rc == 0 else [None, f"ncclGetVersion returned {rc}"]
    except (OSError, AttributeError) as exc:
        out[path] = [None, str(exc).splitlines()[0][:200]]
print(json.dumps(out))
"""

NcclVersions = dict[str, tuple[int | None, str | None]]


def nccl_versions(paths: list[str], timeout_s: float) -> NcclVersions:
    """``ncclGetVersion`` of each library, as NCCL_VERSION_CODE ints, within ``timeout_s``.

    A version read is remembered until its library file changes (another inode, size or
    mtime: an upgrade or a relinked ``libnccl.so.2``), so a fresh interpreter loads the
    library once, not on every collection. Failures are not remembered: they are retried.
    """
    keys = {path: file_key(path) for path in paths}
    answers: NcclVersions = {}
    for path, key in keys.items():
        hit = _versions.get(path)
        if key is not None and hit is not None and hit[0] == key:
            answers[path] = (hit[1], None)
        elif (header := _not_elf(path)) is not None:
            answers[path] = (None, header)
    missing = [path for path in paths if path not in answers]
    if missing:
        probed = _probe_versions(missing, timeout_s)
        for path, (code, _) in probed.items():
            key = keys[path]
            if code is not None and key is not None:
                _versions[path] = (key, code)
        answers.update(probed)
    return answers


def remember_version(path: str, key: FileKey, code: int) -> None:
    """Take a version read earlier (another run's, nccl_cache.py) as if probed here."""
    _versions[path] = (key, code)


def remembered_version(path: str) -> tuple[FileKey, int] | None:
    return _versions.get(path)


def _not_elf(path: str) -> str | None:
    """Why ``path`` cannot be a shared library by its first bytes, without loading it: a
    file that is not ELF (a stub, a linker script, a captured tree's placeholder) fails
    every probe alike, and a probe is a fresh interpreter. None when it may be one, or
    cannot be read here (the probe then says why)."""
    try:
        fd = open_regular_fd(path, follow=True)  # a FIFO planted there must not block us
    except OSError:
        return None
    try:
        magic = os.read(fd, 4)
    except OSError:
        return None
    finally:
        os.close(fd)
    return None if magic == b"\x7fELF" else "not an ELF shared object (no ELF header)"


def _probe_versions(paths: list[str], timeout_s: float) -> NcclVersions:
    """Load each library in one child process and ask it (see _NCCL_PROBE)."""
    import subprocess  # only the NCCL source probes libraries

    try:
        proc = subprocess.run([sys.executable, "-I", "-c", _NCCL_PROBE, *paths],
                              capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        return {p: (None, f"loading took longer than {timeout_s:g} s") for p in paths}
    except OSError as exc:
        return {p: (None, exc.strerror or str(exc)) for p in paths}
    try:
        answer = json.loads(proc.stdout)
    except ValueError:
        why = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {p: (None, f"probe failed: {why[:200]}") for p in paths}
    return {p: (answer[p][0], answer[p][1]) if p in answer else (None, "no answer")
            for p in paths}


def python_site_dirs() -> list[str]:
    """Where this Python imports packages from: pip wheels of NCCL live there."""
    return [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


def host_name() -> str:
    """The host's name, where no name was given (the Slurm programs are given
    SLURMD_NODENAME)."""
    import socket  # only where no name was given: the Slurm programs have theirs

    return socket.gethostname()


def real_nvml() -> ModuleType:
    import pynvml  # pynvml only where NVML is read for real

    module: ModuleType = pynvml
    return module


@record
class SourceEnv:
    """Everything collectors may read. ``params`` gives collectors the check parameters
    that say what to look at (paths to watch, services to ask about)."""
    node: str = field(default_factory=host_name)
    root: Path = Path("/")
    kernel_log_file: Path | None = None
    nvml: Callable[[], Any] = real_nvml
    runner: CommandRunner = run_command
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    find_library: Callable[[str], str | None] = find_library
    nccl_versions: Callable[[list[str], float], NcclVersions] = nccl_versions
    python_site_dirs: Callable[[], list[str]] = python_site_dirs
    simulated: bool = False
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    kernel_lookback_s: float = 7200.0
    # A --kernel-log file's every matching line, the window not applied (snapshot, §8).
    kernel_log_every_line: bool = False
    # Whether to read the hardware's counters (IB port counters, PCIe AER): rate checks,
    # the agent's metrics and counter window, and a report's facts read them; a Slurm
    # program judging the quick checks does not, and they are most of the files a node
    # has (~900 of a dgx-h100's ~1,900).
    counters: bool = True
    # Whether the PCI source reads only what the PCIe path checks judge (a function's
    # vendor, class and the bridges above it, a bridge's ACS control:
    # collectors/pci.py ``read_topology``): the prolog's lean re-run of nccl.acs.
    pci_topology_only: bool = False
    # Where a list, the PCI source adds each bridge's ACS control as it read it where
    # ``pci_topology_only`` (``[config path, value, why unreadable]``): what the prolog's
    # re-run record holds its verdict against (slurm/rerun_record.py).
    acs_read: list[list[object]] | None = None
    # Called before each sample is collected: the simulator brings files that stand for
    # moving hardware counters up to date (real sysfs files are live on their own).
    before_sample: list[Callable[[], None]] = field(default_factory=list)

    def wants(self, check_id: str, key: str, default: Any = None) -> Any:
        return self.params.get(check_id, {}).get(key, default)
