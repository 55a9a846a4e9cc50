"""The host collector against fixture trees and a fake command runner."""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeAlias

import pytest

from clusterdiag.agent.collectors import host
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.host import HostInfo
from clusterdiag.agent.read.sources import CommandResult, SourceEnv

FIXTURES = Path(__file__).parent.parent / "fixtures" / "host"

SYSTEMCTL_OK = (
    "Id=slurmd.service\nActiveState=active\nSubState=running\nLoadState=loaded\n\n"
    "LoadState=not-found\nActiveState=inactive\nSubState=dead\nId=nothing.service\n"
)
CHRONY_SYNCED = (
    "Reference ID    : 0A000005 (10.0.0.5)\nStratum         : 3\n"
    "System time     : 0.000012 seconds fast of NTP time\nLeap status     : Normal\n"
)
NTPQ_SYNCED = (
    "     remote           refid      st t when poll reach   delay   offset  jitter\n"
    "==============================================================================\n"
    "*10.0.0.5        .GPS.            1 u   33   64  377    0.321    0.012   0.004\n"
    "+10.0.0.6        10.0.0.5         2 u   12   64  377    0.410    0.101   0.020\n"
)

Answer: TypeAlias = "CommandResult | Callable[[list[str]], CommandResult]"


class FakeRunner:
    """Answers by program name; a program it does not know is 'not found'."""

    def __init__(self, answers: dict[str, Answer] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv: list[str], timeout_s: float) -> CommandResult:
        self.calls.append((argv, timeout_s))
        answer = self.answers.get(argv[0])
        if answer is None:
            return CommandResult(argv, None, error=f"{argv[0]}: not found")
        if callable(answer):
            return answer(argv)
        return CommandResult(argv, answer.returncode, answer.stdout, answer.stderr,
                             answer.error)

    def programs(self) -> list[str]:
        return [argv[0] for argv, _ in self.calls]


def ok(stdout: str) -> CommandResult:
    return CommandResult([], 0, stdout)


def timed_out(program: str) -> CommandResult:
    return CommandResult([program], None, error=f"{program}: no answer within 3 s")


def collect(scenario: str | Path, runner: FakeRunner | None = None,
            params: dict[str, dict[str, object]] | None = None,
            deadline_s: float = 5.0, counters: bool = True
            ) -> tuple[HostInfo, SourceStats, FakeRunner]:
    runner = runner or FakeRunner()
    root = scenario if isinstance(scenario, Path) else FIXTURES / scenario
    env = SourceEnv(node="n1", root=root, runner=runner, params=params or {},
                    counters=counters)
    stats = SourceStats()
    info = host.collect(env, stats, time.monotonic() + deadline_s)
    return info, stats, runner


def test_healthy_tree_reads_every_fact() -> None:
    info, stats, _ = collect("healthy")
    assert info.hostname == "n1"
    assert info.kernel_release == "5.15.0-105-generic"
    assert info.dmi_product_name == "DGX H100"
    assert info.os_release == "Ubuntu 22.04.4 LTS"
    assert info.cpu_count == 8  # 0-3,8-11
    assert info.memory_total_bytes == 2113560944 * 1024
    assert info.boot_time == 1700000000.0
    assert info.memlock_limit_bytes == -1
    assert info.has_systemd
    assert info.modules == ["mlx5_ib", "nvidia", "nvidia_peermem", "nvidia_uvm"]
    assert info.unknown == {}
    assert stats.files_read > 20


def test_cmdline_keeps_double_quoted_words_together() -> None:
    info, _, _ = collect("healthy")
    assert 'dyndbg=file drivers/pci/* +p' in info.cmdline
    assert info.cmdline[-2:] == ["--", "single"]
    assert "iommu=pt" in info.cmdline


def test_cmdline_split_treats_backslash_and_single_quote_as_plain() -> None:
    assert host.split_cmdline(r"a='b c' d=\x") == ["a='b", "c'", r"d=\x"]


def test_mounts_unescape_octal_and_keep_options() -> None:
    info, _, _ = collect("healthy")
    by_path = {m.mountpoint: m for m in info.mounts}
    assert by_path["/mnt/my data"].fstype == "xfs"
    assert by_path["/home"].device == "10.0.0.5:/export/home"
    assert "vers=4.2" in by_path["/home"].options


def test_edac_counts_per_controller() -> None:
    info, _, _ = collect("healthy")
    assert [(mc.name, mc.corrected, mc.uncorrected) for mc in info.edac] == [
        ("mc0", 3, 0), ("mc1", 0, 0)]


def test_dstate_lists_only_d_processes_with_start_ticks_and_wchan() -> None:
    info, _, _ = collect("healthy")
    stuck = {p.pid: p for p in info.dstate}
    assert set(stuck) == {77, 1234, 2345}
    assert stuck[77].name == "my (odd) proc"
    assert stuck[77].start_ticks == 4242
    assert stuck[2345].wchan == "rpc_wait_bit_killable"
    assert stuck[1234].wchan is None  # the kernel prints 0 when it will not say


def test_no_process_is_read_when_the_run_judges_no_rates() -> None:
    """Only host.dstate_processes (a rate check) reads the list, and a node runs thousands
    of processes (~28 us each): a Slurm program's quick checks do not scan, and the
    snapshot says so, so a rate check that judged it anyway would not read "none stuck"."""
    scanned, stats_scanned, _ = collect("healthy")
    info, stats, _ = collect("healthy", counters=False)
    assert info.dstate == []
    assert info.unknown["dstate"] == "not sampled: this run judges no rates"
    processes = sum(1 for e in (FIXTURES / "healthy/proc").iterdir() if e.name.isdigit())
    assert stats_scanned.files_read - stats.files_read >= processes
    assert len(scanned.dstate) == 3


def test_disk_usage_for_wanted_paths_with_error_for_missing() -> None:
    info, _, _ = collect("healthy", params={"host.disk": {"paths": ["/", "/tmp", "/scratch"]}})
    disks = {d.path: d for d in info.disks}
    assert disks["/"].total_bytes
    assert disks["/"].free_bytes is not None
    assert disks["/"].inodes_total is not None
    assert disks["/tmp"].error is None
    assert disks["/scratch"].error == "No such file or directory"
    assert disks["/scratch"].total_bytes is None


def test_hung_statvfs_costs_only_the_disks(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    real_statvfs = os.statvfs

    def statvfs(path: str | Path) -> os.statvfs_result:
        if str(path).endswith("nfs"):
            release.wait(120)
        return real_statvfs(path)

    monkeypatch.setattr(os, "statvfs", statvfs)
    started = time.monotonic()
    try:
        info, _, _ = collect("healthy", params={"host.disk": {"paths": ["/", "/nfs", "/tmp"]}})
    finally:
        release.set()
    # the hung call would hold it 120 s; the rest is slack for a loaded machine
    assert time.monotonic() - started < host.STATVFS_TIMEOUT_S + 15.0
    assert [d.error is None for d in info.disks] == [True, False, False]
    assert "hung filesystem" in (info.disks[1].error or "")
    assert info.cpu_count == 8


def test_default_disk_paths() -> None:
    info, _, _ = collect("healthy")
    assert [d.path for d in info.disks] == ["/", "/tmp"]


def test_fallback_sources() -> None:
    info, _, _ = collect("fallbacks")
    assert info.cpu_count == 2  # cpuN lines of /proc/stat
    assert info.os_release == "Rocky Linux 9.4 (Blue Onyx)"
    assert [m.mountpoint for m in info.mounts] == ["/"]
    assert info.modules == ["nvidia"]  # initstate live; coming and built-in are not loaded
    assert info.memlock_limit_bytes == 8388608
    assert not info.has_systemd
    assert "dmi_product_name" in info.unknown


def test_garbage_and_unreadable_values_become_unknown() -> None:
    info, _, _ = collect("broken")
    assert info.cpu_count is None
    assert "cpu_count" in info.unknown
    assert info.memory_total_bytes is None
    assert "memory_total_bytes" in info.unknown
    assert info.boot_time is None
    assert "garbage" in info.unknown["boot_time"]
    assert info.cmdline == []
    assert "unbalanced quote" in info.unknown["cmdline"]
    assert info.mounts == []
    assert "is a directory" in info.unknown["mounts"]
    assert info.memlock_limit_bytes is None
    assert "memlock_limit_bytes" in info.unknown
    assert info.os_release is None
    assert "os_release" in info.unknown
    assert info.dmi_product_name is None
    assert "is a directory" in info.unknown["dmi_product_name"]
    assert info.kernel_release is None
    assert "missing" in info.unknown["kernel_release"]
    assert "modules" in info.unknown


def test_broken_edac_counts_are_none_with_reasons() -> None:
    info, _, _ = collect("broken")
    (mc,) = info.edac
    assert (mc.corrected, mc.uncorrected) == (None, None)
    assert "garbage" in info.unknown["edac.mc0.ce_count"]
    assert "is a directory" in info.unknown["edac.mc0.ue_count"]


def test_broken_process_stat_lines_are_unknown_not_fatal() -> None:
    info, _, _ = collect("broken")
    assert info.dstate == []
    assert "garbage" in info.unknown["dstate.42"]  # truncated before field 22
    assert "is a directory" in info.unknown["dstate.43"]
    assert "garbage" in info.unknown["dstate.44"]  # no parentheses around comm


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_permission_denied_is_unknown(tmp_path: Path) -> None:
    root = tmp_path / "root"
    shutil.copytree(FIXTURES / "healthy", root)
    (root / "proc/meminfo").chmod(0)
    info, _, _ = collect(root)
    assert info.unknown["memory_total_bytes"] == "/proc/meminfo: Permission denied (EACCES)"


def test_services_one_systemctl_call_matched_in_order() -> None:
    runner = FakeRunner({"systemctl": ok(SYSTEMCTL_OK)})
    info, stats, _ = collect("healthy", runner, {"host.services": {"required": ["slurmd",
                                                                                "nothing"]}})
    systemctl = [(argv, t) for argv, t in runner.calls if argv[0] == "systemctl"]
    assert len(systemctl) == 1
    argv, timeout = systemctl[0]
    assert argv[-2:] == ["slurmd", "nothing"]
    assert timeout == host.COMMAND_TIMEOUT_S
    states = {s.name: s for s in info.services}
    assert (states["slurmd"].active, states["slurmd"].sub) == ("active", "running")
    assert states["nothing"].load == "not-found"
    assert stats.calls == len(runner.calls)


def test_services_match_by_id_when_blocks_are_missing() -> None:
    answer = "Id=munge.service\nActiveState=failed\nSubState=failed\nLoadState=loaded\n"
    runner = FakeRunner({"systemctl": ok(answer)})
    info, _, _ = collect("healthy", runner, {"host.services": {"required": ["slurmd",
                                                                                "munge"]}})
    states = {s.name: s for s in info.services}
    assert states["munge"].active == "failed"
    assert states["slurmd"].error == "systemctl: no answer for this unit"


def test_services_timeout_marks_every_unit() -> None:
    runner = FakeRunner({"systemctl": timed_out("systemctl")})
    info, _, _ = collect("healthy", runner, {"host.services": {"required": ["a", "b"]}})
    assert [s.error for s in info.services] == ["systemctl: no answer within 3 s"] * 2


def test_services_nonzero_exit_is_an_error() -> None:
    runner = FakeRunner({"systemctl": CommandResult([], 1, "", "Failed to connect to bus")})
    info, _, _ = collect("healthy", runner, {"host.services": {"required": ["a"]}})
    assert info.services[0].error == "systemctl: exit 1: Failed to connect to bus"


def test_no_systemctl_call_without_systemd_or_units() -> None:
    _, _, runner = collect("fallbacks", params={"host.services": {"required": ["slurmd"]}})
    assert "systemctl" not in runner.programs()
    _, _, runner = collect("healthy")
    assert "systemctl" not in runner.programs()


def test_clock_from_timedatectl_first() -> None:
    runner = FakeRunner({"timedatectl": ok("yes\n"), "chronyc": ok(CHRONY_SYNCED)})
    info, _, _ = collect("healthy", runner)
    assert info.clock is not None
    assert (info.clock.method, info.clock.synchronized) == ("timedatectl", True)
    assert "chronyc" not in runner.programs()


def test_clock_falls_back_to_chronyc_when_timedatectl_fails() -> None:
    runner = FakeRunner({
        "timedatectl": CommandResult([], 1, "", "System has not been booted with systemd"),
        "chronyc": ok(CHRONY_SYNCED.replace("Normal", "Not synchronised")),
    })
    info, _, _ = collect("healthy", runner)
    assert info.clock is not None
    assert (info.clock.method, info.clock.synchronized) == ("chronyc", False)
    assert "clock" not in info.unknown


@pytest.mark.parametrize(("stdout", "synced"), [
    (NTPQ_SYNCED, True),
    (NTPQ_SYNCED.replace("*10.0.0.5", " 10.0.0.5"), False),
])
def test_clock_from_ntpq(stdout: str, synced: bool) -> None:
    runner = FakeRunner({"chronyc": CommandResult([], 1, "506 Cannot talk to daemon"),
                         "ntpq": ok(stdout)})
    info, _, _ = collect("healthy", runner)
    assert info.clock is not None
    assert (info.clock.method, info.clock.synchronized) == ("ntpq", synced)


def test_clock_without_any_tool_has_no_method_and_no_unknown() -> None:
    info, _, runner = collect("healthy")
    assert info.clock is not None
    assert info.clock.method is None
    assert "clock" not in info.unknown
    assert runner.programs() == ["timedatectl", "chronyc", "ntpq"]


def test_clock_tool_that_hangs_is_unknown() -> None:
    runner = FakeRunner({"timedatectl": timed_out("timedatectl")})
    info, _, _ = collect("healthy", runner)
    assert info.clock is not None
    assert info.clock.method is None
    assert info.unknown["clock"] == "timedatectl: no answer within 3 s"


def test_clock_garbage_answer_hands_over() -> None:
    runner = FakeRunner({"timedatectl": ok("maybe\n"), "chronyc": ok(CHRONY_SYNCED)})
    info, _, _ = collect("healthy", runner)
    assert info.clock is not None
    assert info.clock.method == "chronyc"


def test_commands_respect_the_deadline() -> None:
    runner = FakeRunner({"timedatectl": ok("yes\n")})
    collect("healthy", runner, deadline_s=1.0)
    assert all(0 < timeout <= 1.0 for _, timeout in runner.calls)


def test_no_command_after_the_deadline() -> None:
    runner = FakeRunner({"systemctl": ok(SYSTEMCTL_OK), "timedatectl": ok("yes\n")})
    info, stats, _ = collect("healthy", runner, {"host.services": {"required": ["slurmd"]}},
                             deadline_s=-1.0)
    assert runner.calls == []
    assert stats.calls == 0
    assert info.services[0].error == "no time left before the deadline"
    assert info.unknown["clock"] == "no time left before the deadline"


@pytest.mark.parametrize(("text", "count"), [("0", 1), ("0-127", 128), ("0-3,8-11", 8),
                                             ("0,2,4", 3), ("0-", None), ("3-1", None),
                                             ("x", None), ("", None)])
def test_parse_cpu_list(text: str, count: int | None) -> None:
    assert host.parse_cpu_list(text) == count
