"""The agent's kept command answers (agent/daemon/commands.py): reused while younger than
the keep time, asked again after it, and never for a timeout, a program that could not be
started, or a program off the list."""

from __future__ import annotations

import threading

from clusterdiag.agent.daemon.commands import MAX_KEPT, KeptRunner
from clusterdiag.agent.read.sources import CommandResult

SHOW = ["timedatectl", "show", "-p", "NTPSynchronized", "--value"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Answers:
    """A runner whose answer to each argv is set by the test; counts what it ran."""

    def __init__(self) -> None:
        self.ran: list[list[str]] = []
        self.answer: dict[str, CommandResult] = {}

    def __call__(self, argv: list[str], timeout_s: float) -> CommandResult:
        self.ran.append(argv)
        return self.answer.get(argv[0], CommandResult(argv, 0, f"{argv[0]} {len(self.ran)}"))


def _kept(keep_s: float = 120.0) -> tuple[KeptRunner, Answers, Clock]:
    inner, clock = Answers(), Clock()
    return KeptRunner(inner, keep_s, clock), inner, clock


def test_an_answer_is_reused_until_it_is_keep_s_old() -> None:
    runner, inner, clock = _kept()
    first = runner(SHOW, 3.0)
    clock.now += 119.9
    assert runner(SHOW, 3.0) is first
    assert len(inner.ran) == 1
    clock.now += 0.1  # 120 s after it was asked: asked again, and the new answer kept
    second = runner(SHOW, 3.0)
    assert second.stdout == "timedatectl 2"
    clock.now += 60
    assert runner(SHOW, 3.0) is second
    assert len(inner.ran) == 2


def test_a_changed_answer_is_seen_once_the_old_one_expires() -> None:
    """A clock that lost its sync is in the answer at most keep_s after the last asking."""
    runner, inner, clock = _kept(keep_s=30)
    inner.answer["timedatectl"] = CommandResult(SHOW, 0, "yes\n")
    assert runner(SHOW, 3.0).stdout == "yes\n"
    inner.answer["timedatectl"] = CommandResult(SHOW, 0, "no\n")
    clock.now += 29
    assert runner(SHOW, 3.0).stdout == "yes\n"
    clock.now += 1
    assert runner(SHOW, 3.0).stdout == "no\n"


def test_each_argv_is_its_own_answer() -> None:
    runner, inner, _ = _kept()
    pfc0 = runner(["dcb", "pfc", "show", "dev", "eth0"], 2.0)
    pfc1 = runner(["dcb", "pfc", "show", "dev", "eth1"], 2.0)
    assert pfc0.stdout != pfc1.stdout
    assert runner(["dcb", "pfc", "show", "dev", "eth0"], 2.0) is pfc0
    assert len(inner.ran) == 2


def test_a_failing_exit_is_an_answer_and_kept() -> None:
    runner, inner, _ = _kept()
    inner.answer["dcb"] = CommandResult(["dcb"], 1, "", "Attribute read: Operation not supported")
    assert runner(["dcb", "pfc", "show", "dev", "eth0"], 2.0).returncode == 1
    assert runner(["dcb", "pfc", "show", "dev", "eth0"], 2.0).returncode == 1
    assert len(inner.ran) == 1


def test_timeouts_and_programs_not_started_are_asked_again() -> None:
    runner, inner, _ = _kept()
    inner.answer["timedatectl"] = CommandResult(["timedatectl"], None,
                                                error="timedatectl: no answer within 3 s")
    inner.answer["chronyc"] = CommandResult(["chronyc"], None, error="chronyc: not found")
    for _ in range(2):
        assert runner(["timedatectl", "show"], 3.0).error is not None
        assert runner(["chronyc", "-n", "tracking"], 3.0).error is not None
    assert len(inner.ran) == 4


def test_a_timeout_drops_the_kept_answer() -> None:
    runner, inner, clock = _kept()
    runner(SHOW, 3.0)
    clock.now += 200
    inner.answer["timedatectl"] = CommandResult(SHOW, None, error="timedatectl: no answer")
    assert runner(SHOW, 3.0).error == "timedatectl: no answer"
    del inner.answer["timedatectl"]
    clock.now += 1  # the old answer is not brought back: asked again
    assert runner(SHOW, 3.0).stdout == "timedatectl 3"


def test_other_programs_are_never_kept() -> None:
    """A measurement, and systemctl: a unit that died must reach the report the prolog
    trusts within one interval."""
    runner, inner, _ = _kept()
    for argv in (["all_reduce_perf", "-b", "8", "-e", "1G"],
                 ["systemctl", "show", "--property=Id,ActiveState", "--", "nvidia-imex"]):
        assert runner(argv, 60.0).stdout != runner(argv, 60.0).stdout
    assert len(inner.ran) == 4


def test_keep_zero_asks_every_time() -> None:
    runner, inner, _ = _kept(keep_s=0)
    runner(SHOW, 3.0)
    runner(SHOW, 3.0)
    assert len(inner.ran) == 2


def test_bounded_least_recently_used_first() -> None:
    runner, inner, _ = _kept()
    for index in range(MAX_KEPT + 10):
        runner(["dcb", "pfc", "show", "dev", f"eth{index}"], 2.0)
    assert len(inner.ran) == MAX_KEPT + 10
    runner(["dcb", "pfc", "show", "dev", f"eth{MAX_KEPT + 9}"], 2.0)  # newest: kept
    assert len(inner.ran) == MAX_KEPT + 10
    runner(["dcb", "pfc", "show", "dev", "eth0"], 2.0)  # oldest: dropped, asked again
    assert len(inner.ran) == MAX_KEPT + 11


def test_side_by_side_callers() -> None:
    """The RoCE netdevs ask from their own threads at once."""
    runner, inner, _ = _kept()
    argvs = [["dcb", "-N", "app", "show", "dev", f"eth{i % 4}", "dscp-prio"] for i in range(40)]
    threads = [threading.Thread(target=runner, args=(argv, 2.0)) for argv in argvs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert 4 <= len(inner.ran) <= 40
    before = len(inner.ran)
    for argv in argvs:
        runner(argv, 2.0)
    assert len(inner.ran) == before
