"""The host collector: /proc, /sys and /etc facts plus systemctl and clock-sync answers.

Everything is read under ``env.root`` so a captured tree or a simulated node reads the
same way as the live host, and every command goes through ``env.runner`` under the
source's deadline. A value that cannot be read or parsed is recorded in
``HostInfo.unknown`` with its reason and the rest of the host is still collected: one bad
file costs one value, never the report.
"""

from __future__ import annotations

import os
import re
import shlex
import threading
import time
from pathlib import Path

from ..model import SourceStats
from ..model.host import (
    ClockSync,
    DiskUsage,
    EdacController,
    HostInfo,
    ImexState,
    Mount,
    ServiceState,
    StuckProcess,
)
from ..read.sources import CommandResult, SourceEnv
from ..read.sysfs import (
    FileCounter,
    list_dir,
    parse_int,
    raise_if_exhausted,
    read_int,
    read_reason,
    read_text,
    under,
)
from . import imex

DEFAULT_DISK_PATHS = ("/", "/tmp")
COMMAND_TIMEOUT_S = 3.0
STATVFS_TIMEOUT_S = 1.0
# Kept back from the source's deadline for what follows a command: the runner waits for the
# source up to the same deadline, and a command given every last second would make the
# whole host source late for the sake of one value.
FINISH_RESERVE_S = 0.3
_SERVICE_PROPERTIES = "Id,ActiveState,SubState,LoadState"
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


class _Ctx:
    """What every reader below shares: where to read, what to count, when to stop."""

    def __init__(self, env: SourceEnv, stats: SourceStats, deadline: float) -> None:
        self.env = env
        self.stats = stats
        self.deadline = deadline
        self.files = FileCounter()
        self.info = HostInfo(hostname=env.node)

    def path(self, absolute: str) -> Path:
        return under(self.env.root, absolute)

    def text(self, absolute: str, name: str) -> str | None:
        value, reason = read_text(self.path(absolute), self.files)
        if value is None:
            self.info.unknown[name] = f"{absolute}: {reason}"
        return value

    def run(self, argv: list[str], limit_s: float = COMMAND_TIMEOUT_S) -> CommandResult | None:
        """Run ``argv`` with at most ``limit_s`` (3 s unless a tool needs more), ending
        before the deadline; None when no time is left."""
        left = self.deadline - FINISH_RESERVE_S - time.monotonic()
        if left <= 0:
            return None
        self.stats.calls += 1
        return self.env.runner(argv, min(limit_s, left))


def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> HostInfo:
    """Read the host's facts; ``deadline`` is a ``time.monotonic()`` value for commands."""
    ctx = _Ctx(env, stats, deadline)
    info = ctx.info
    info.kernel_release = ctx.text("/proc/sys/kernel/osrelease", "kernel_release")
    info.dmi_product_name = ctx.text("/sys/class/dmi/id/product_name", "dmi_product_name")
    info.os_release = _os_release(ctx)
    info.cpu_count = _cpu_count(ctx)
    info.memory_total_bytes = _memory_total(ctx)
    info.boot_time = _boot_time(ctx)
    info.cmdline = _cmdline(ctx)
    info.mounts = _mounts(ctx)
    info.disks = _disks(ctx, list(env.wants("host.disk", "paths", DEFAULT_DISK_PATHS)))
    info.edac = _edac(ctx)
    info.dstate = _dstate(ctx)
    info.modules = _modules(ctx)
    info.memlock_limit_bytes = _memlock(ctx)
    info.has_systemd = ctx.path("/run/systemd/system").is_dir()
    info.services = _services(ctx, wanted_units(env))
    info.clock = _clock(ctx)
    # Last: nvidia-imex-ctl may take its whole 30 s (it is known to hang), so it gets only
    # what the rest left, less FINISH_RESERVE_S (``_Ctx.run``), and leaves no value unread.
    info.imex = _imex(ctx)
    stats.files_read += ctx.files.count
    return info


def _os_release(ctx: _Ctx) -> str | None:
    """PRETTY_NAME from os-release(5): /etc/os-release, else /usr/lib/os-release."""
    text, reason = read_text(ctx.path("/etc/os-release"), ctx.files)
    if text is None:
        text, reason = read_text(ctx.path("/usr/lib/os-release"), ctx.files)
    if text is None:
        ctx.info.unknown["os_release"] = f"os-release: {reason}"
        return None
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "PRETTY_NAME":
            try:
                words = shlex.split(value)
            except ValueError:
                break
            return " ".join(words)
    ctx.info.unknown["os_release"] = "os-release: no readable PRETTY_NAME"
    return None


_MAX_CPU_DIGITS = 9  # far beyond any CPU id; int() refuses 4300 digits and more


def parse_cpu_list(text: str) -> int | None:
    """Count the CPUs in a kernel cpu list such as ``0-63,128-191``; None when malformed."""
    count = 0
    for part in text.strip().split(","):
        low, dash, high = part.partition("-")
        # isdigit() also accepts '²', which int() refuses: only ASCII decimals are CPU ids.
        if not (low.isascii() and low.isdecimal()) or (
                dash and not (high.isascii() and high.isdecimal())):
            return None
        if len(low) > _MAX_CPU_DIGITS or len(high) > _MAX_CPU_DIGITS:
            return None
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            return None
        count += last - first + 1
    return count


def _cpu_count(ctx: _Ctx) -> int | None:
    """Online logical CPUs, from ``/sys/devices/system/cpu/online``, else ``/proc/stat``.

    Not psutil: ``psutil.cpu_count()`` is ``os.cpu_count()``, the *configured* CPUs of the
    machine running clusterdiag, which ignores ``--root`` and counts CPUs the kernel took
    offline (the very fault this measures); pointing ``psutil.PROCFS_PATH`` at the root
    would not change that and would race with the other collector threads. The kernel's
    online list is the truth for the root being read, live or captured. It is the host's
    count, not this process's cpuset, which is what a node health check wants.
    """
    online, reason = read_text(ctx.path("/sys/devices/system/cpu/online"), ctx.files)
    if online is not None:
        count = parse_cpu_list(online)
        if count is not None:
            return count
        reason = f"garbage {online[:40]!r}"
    stat, stat_reason = read_text(ctx.path("/proc/stat"), ctx.files)
    cpus = [line for line in (stat or "").splitlines() if re.match(r"cpu\d+\s", line)]
    if cpus:
        return len(cpus)
    ctx.info.unknown["cpu_count"] = (f"/sys/devices/system/cpu/online: {reason}; "
                                     f"/proc/stat: {stat_reason or 'no cpuN lines'}")
    return None


def _memory_total(ctx: _Ctx) -> int | None:
    text = ctx.text("/proc/meminfo", "memory_total_bytes")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            words = line.split()
            kib, _ = parse_int(words[1], 10) if len(words) >= 2 else (None, None)
            if kib is not None and kib >= 0:
                return kib * 1024  # meminfo's "kB" is KiB
            break
    ctx.info.unknown["memory_total_bytes"] = "/proc/meminfo: no readable MemTotal"
    return None


def _boot_time(ctx: _Ctx) -> float | None:
    text = ctx.text("/proc/stat", "boot_time")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("btime "):
            value, reason = parse_int(line[len("btime "):])
            if value is not None and value >= 0:
                return float(value)
            ctx.info.unknown["boot_time"] = f"/proc/stat btime: {reason or 'negative'}"
            return None
    ctx.info.unknown["boot_time"] = "/proc/stat: no btime line"
    return None


def split_cmdline(text: str) -> list[str]:
    """Split a kernel command line the way the kernel does (``next_arg``).

    Only double quotes group words (``dyndbg="file x.c +p"``) and a backslash is an
    ordinary character, so shlex runs with those rules rather than a shell's. Raises
    ValueError on an unbalanced quote.
    """
    lexer = shlex.shlex(text, posix=True)
    lexer.whitespace_split = True
    lexer.quotes = '"'
    lexer.escape = ""
    lexer.commenters = ""
    return list(lexer)


def _cmdline(ctx: _Ctx) -> list[str]:
    text = ctx.text("/proc/cmdline", "cmdline")
    if text is None:
        return []
    try:
        return split_cmdline(text)
    except ValueError:
        ctx.info.unknown["cmdline"] = f"/proc/cmdline: unbalanced quote in {text[:60]!r}"
        return []


def _unescape(field: str) -> str:
    """Undo the kernel's octal escapes in mount fields (``\\040`` for a space)."""
    return _OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), field)


def _mounts(ctx: _Ctx) -> list[Mount]:
    text, reason = read_text(ctx.path("/proc/self/mounts"), ctx.files)
    if text is None:
        text, reason = read_text(ctx.path("/proc/mounts"), ctx.files)
    if text is None:
        ctx.info.unknown["mounts"] = f"/proc/self/mounts, /proc/mounts: {reason}"
        return []
    mounts = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split()
        if len(words) < 4:
            ctx.info.unknown[f"mounts.line{number}"] = f"garbage {line[:60]!r}"
            continue
        device, mountpoint, fstype, options = words[:4]
        mounts.append(Mount(_unescape(mountpoint), fstype, _unescape(device),
                            options.split(",")))
    return mounts


def _disk(ctx: _Ctx, path: str) -> DiskUsage:
    """Space and inodes as df shows them: free space is what non-root users may use."""
    try:
        vfs = os.statvfs(ctx.path(path))
    except OSError as exc:
        return DiskUsage(path, error=exc.strerror or type(exc).__name__)
    return DiskUsage(path, total_bytes=vfs.f_blocks * vfs.f_frsize,
                     free_bytes=vfs.f_bavail * vfs.f_frsize,
                     inodes_total=vfs.f_files, inodes_free=vfs.f_favail)


def _disks(ctx: _Ctx, paths: list[str]) -> list[DiskUsage]:
    """Measure ``paths`` in a daemon thread, waiting at most 1 s.

    statvfs on a mount whose NFS/Lustre server is gone blocks in the kernel for as long
    as the server stays away, the classic way a health checker hangs. Waiting in a side
    thread turns that into one error per unmeasured path and keeps the rest of the host.
    """
    measured: dict[str, DiskUsage] = {}

    def measure() -> None:
        for path in paths:
            measured[path] = _disk(ctx, path)

    worker = threading.Thread(target=measure, daemon=True, name="host-statvfs")
    worker.start()
    worker.join(max(0.0, min(STATVFS_TIMEOUT_S,
                             ctx.deadline - FINISH_RESERVE_S - time.monotonic())))
    late = f"no answer within {STATVFS_TIMEOUT_S:g} s (hung filesystem?)"
    return [measured.get(path) or DiskUsage(path, error=late) for path in paths]


def _edac(ctx: _Ctx) -> list[EdacController]:
    """Corrected/uncorrected counts per EDAC memory controller (since boot or driver load)."""
    base = "/sys/devices/system/edac/mc"
    controllers = []
    for name in list_dir(ctx.path(base)):
        if not re.fullmatch(r"mc\d+", name):
            continue
        mc = EdacController(name)
        for attr, file in (("corrected", "ce_count"), ("uncorrected", "ue_count")):
            value, reason = read_int(ctx.path(f"{base}/{name}/{file}"), ctx.files, base=10)
            if value is None:
                ctx.info.unknown[f"edac.{name}.{file}"] = reason or "unreadable"
            setattr(mc, attr, value)
        controllers.append(mc)
    return controllers


def _dstate(ctx: _Ctx) -> list[StuckProcess]:
    """Processes in uninterruptible sleep (state ``D``) right now.

    ``/proc/<pid>/stat`` puts ``comm`` in parentheses and ``comm`` may itself hold spaces
    or parentheses, so fields are counted from the *last* ``)``: state is field 3 and the
    start time (clock ticks since boot) field 22, which with the pid identifies one
    process across two samples even when pids are reused. A process that exits between
    listing and reading is not an error.

    Every process is read, kernel threads included (a node runs thousands), at ~28 us
    each, most of it the kernel's (30 ms for 1,065 processes here, a bare open/read/close
    loop 22 ms); each file is opened relative to ``/proc``. Only ``host.dstate_processes``
    reads the list, and only at ``full`` (it compares two samples): a run that judges no
    rates (``SourceEnv.counters``: the Slurm programs' quick checks) does not scan at all,
    and says so.
    """
    if not ctx.env.counters:
        ctx.info.unknown["dstate"] = "not sampled: this run judges no rates"
        return []
    where = ctx.path("/proc")
    try:
        proc = os.open(where, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise_if_exhausted(exc, "/proc")
        ctx.info.unknown["dstate"] = f"/proc: {read_reason(exc)}"
        return []
    stuck = []
    try:
        for entry in list_dir(where):
            if entry.isdigit():
                found = _stuck(ctx, proc, entry)
                if found is not None:
                    stuck.append(found)
    finally:
        os.close(proc)
    return stuck


def _stuck(ctx: _Ctx, proc: int, entry: str) -> StuckProcess | None:
    """The process ``entry`` of the open ``/proc`` if it is in D state."""
    text, reason = read_text(f"{entry}/stat", ctx.files, dir_fd=proc)
    if text is None:
        if reason != "missing":
            ctx.info.unknown[f"dstate.{entry}"] = f"/proc/{entry}/stat: {reason}"
        return None
    head, sep, tail = text.rpartition(")")
    fields = tail.split()
    start, _ = parse_int(fields[19], 10) if len(fields) >= 20 else (None, None)
    if not sep or "(" not in head or start is None or start < 0:
        ctx.info.unknown[f"dstate.{entry}"] = f"/proc/{entry}/stat: garbage {text[:60]!r}"
        return None
    if fields[0] != "D":
        return None
    wchan, _ = read_text(f"{entry}/wchan", ctx.files, dir_fd=proc)
    return StuckProcess(pid=int(entry), name=head.partition("(")[2], start_ticks=start,
                        wchan=wchan if wchan and wchan != "0" else None)


def _modules(ctx: _Ctx) -> list[str]:
    """Loaded (loadable) kernel modules, from ``/proc/modules``, else ``/sys/module``.

    ``/proc/modules`` lists exactly the loaded modules in one read. Without it, a name
    under ``/sys/module`` is not enough: built-in code with parameters appears there too.
    Only a loadable module has ``initstate`` (ABI sysfs-module), and it reads ``live``
    once the module finished loading (``coming``/``going`` are transitions), so that is
    the rule.
    """
    text, _ = read_text(ctx.path("/proc/modules"), ctx.files)
    if text is not None:
        return sorted(line.split()[0] for line in text.splitlines() if line.split())
    base = ctx.path("/sys/module")
    if not base.is_dir():
        ctx.info.unknown["modules"] = "/proc/modules, /sys/module: missing"
        return []
    return [name for name in list_dir(base)
            if read_text(base / name / "initstate", ctx.files)[0] == "live"]


def _memlock(ctx: _Ctx) -> int | None:
    """The soft ``Max locked memory`` of this process's limits, in bytes; -1 = unlimited."""
    text = ctx.text("/proc/self/limits", "memlock_limit_bytes")
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith("Max locked memory"):
            soft = line[len("Max locked memory"):].split()[:1]
            if soft == ["unlimited"]:
                return -1
            limit, _ = parse_int(soft[0], 10) if soft else (None, None)
            if limit is not None and limit >= 0:
                return limit
            break
    ctx.info.unknown["memlock_limit_bytes"] = "/proc/self/limits: no readable Max locked memory"
    return None


def _answer(result: CommandResult | None) -> str | None:
    """The output of a command that ran and exited 0, else None."""
    if result is None or result.error is not None or result.returncode != 0:
        return None
    return result.stdout


def _failure(result: CommandResult | None) -> str:
    """Why a command gave no answer: no time left, not found, timed out, or its exit."""
    if result is None:
        return "no time left before the deadline"
    if result.error is not None:
        return result.error
    first = (result.stderr.strip() or result.stdout.strip()).splitlines()[:1]
    return f"{result.argv[0]}: exit {result.returncode}" + (f": {first[0]}" if first else "")


def _unit_id(name: str) -> str:
    return name if "." in name else f"{name}.service"


def wanted_units(env: SourceEnv) -> list[str]:
    """The units to ask systemctl about: host.services' list plus any check's ``unit``
    parameter (fabric.manager, fabric.imex), so one systemctl call serves them all."""
    units = [str(u) for u in env.wants("host.services", "required", []) or []]
    for params in env.params.values():
        unit = params.get("unit")
        if isinstance(unit, str) and unit not in units:
            units.append(unit)
    return units


def _services(ctx: _Ctx, names: list[str]) -> list[ServiceState]:
    """Ask systemctl about every required unit in one call.

    ``systemctl show`` prints one blank-line-separated block per unit in argument order,
    and ``Id`` is the unit's canonical name, which differs from the name asked for when
    that is an alias (``sshd.service`` -> ``ssh.service``). So blocks are matched by
    position when there is one per unit, and by ``Id`` otherwise.
    """
    if not names or not ctx.info.has_systemd:
        return []
    result = ctx.run(["systemctl", "show", f"--property={_SERVICE_PROPERTIES}", "--", *names])
    stdout = _answer(result)
    if stdout is None:
        return [ServiceState(name, error=_failure(result)) for name in names]
    blocks = [dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
              for block in re.split(r"\n\s*\n", stdout.strip()) if block.strip()]
    if len(blocks) != len(names):
        by_id = {block.get("Id"): block for block in blocks}
        blocks = [by_id.get(_unit_id(name), {}) for name in names]
    states = []
    for name, block in zip(names, blocks, strict=True):
        if "ActiveState" not in block:
            states.append(ServiceState(name, error="systemctl: no answer for this unit"))
            continue
        states.append(ServiceState(name, active=block["ActiveState"],
                                   sub=block.get("SubState"), load=block.get("LoadState")))
    return states


def _imex(ctx: _Ctx) -> ImexState | None:
    """The tray's IMEX state, read only where fabric.imex is among the checks (not in the
    prolog). nvidia-imex-ctl runs only where the IMEX unit is up, so a host without IMEX
    costs three lookups and no command."""
    params = ctx.env.params.get("fabric.imex")
    if params is None:
        return None
    unit = _unit_id(str(params.get("unit", "nvidia-imex.service")))
    running = any(_unit_id(s.name) == unit and s.active in ("active", "reloading")
                  for s in ctx.info.services)
    return imex.read(ctx.path, ctx.files, ctx.run, running, ctx.info.hostname,
                     ctx.env.simulated)


def _clock_timedatectl(stdout: str) -> bool | None:
    """``NTPSynchronized``: the kernel's sync flag, set by whichever NTP daemon runs."""
    return {"yes": True, "no": False}.get(stdout.strip())


def _clock_chronyc(stdout: str) -> bool | None:
    """``Leap status : Normal`` once chronyd has a synchronised source."""
    for line in stdout.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Leap status":
            return value.strip() == "Normal"
    return None


def _clock_ntpq(stdout: str) -> bool | None:
    """``ntpq -pn`` marks the selected system peer with ``*`` (``o`` for a PPS peer)."""
    if not stdout.strip():
        return None
    peers = stdout.splitlines()[2:]  # after the column header and the ===== rule
    return any(line[:1] in ("*", "o") for line in peers)


_CLOCK_METHODS = (
    ("timedatectl", ["timedatectl", "show", "-p", "NTPSynchronized", "--value"],
     _clock_timedatectl),
    ("chronyc", ["chronyc", "-n", "tracking"], _clock_chronyc),
    ("ntpq", ["ntpq", "-pn"], _clock_ntpq),
)


def _clock(ctx: _Ctx) -> ClockSync:
    """The first of timedatectl, chronyc, ntpq that answers says whether time is synced.

    A tool that is missing or fails (chronyc when chronyd is not running) hands over to
    the next. When none answers the method stays None: the host offers no way to tell.
    If one of them hung, though, that is recorded as unknown, since the host had a way
    and it did not answer.
    """
    failures = []
    for method, argv, parse in _CLOCK_METHODS:
        result = ctx.run(argv)
        stdout = _answer(result)
        if stdout is not None:
            synced = parse(stdout)
            if synced is not None:
                return ClockSync(method, synced, stdout.strip()[:500])
            failures.append(f"{method}: unexpected output {stdout.strip()[:60]!r}")
            continue
        failures.append(_failure(result))
        if result is None or _hung(result):
            ctx.info.unknown.setdefault("clock", failures[-1])  # the first hang is the cause
    return ClockSync(None, None, "; ".join(failures))


def _hung(result: CommandResult) -> bool:
    """Started but gave no answer (timed out), as opposed to not being installed."""
    return result.returncode is None and not (result.error or "").endswith("not found")
