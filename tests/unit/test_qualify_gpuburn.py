"""gpu_burn held to what it printed back (gpu_burn-drv.cpp:913-914): the run counts only when
its own lines say it used the planned compare file and burned for the planned seconds;
otherwise it is an ``error`` naming what it used against what was asked, never a pass or a
fail (a FAULTY verdict of a run that did something else drains nobody)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.qualify.parsers import gpuburn
from clusterdiag.agent.qualify.plan import Step
from clusterdiag.agent.qualify.run import result_run
from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.qualify.active import GPU_BURN, fill
from clusterdiag.checks.qualify.judge import run_findings
from tests.real import real_file, real_names

COMPARE = "/opt/gpu-burn/compare.fatbin"
ARGV = ("gpu_burn", *fill(GPU_BURN.argv, {"precision": "-d", "compare": COMPARE,
                                          "burn_s": "30"}))
STEP = Step("gpu_compute", "gpu_burn", ARGV, tests=("gpu_compute",))
# The real capture's progress and verdict lines (superbench, 8 x A100), which predate the
# printed-back lines; what the real binary prints first comes before them in each case.
BODY = real_file("real/active", "active",
                 next(f for f in real_names("real/active", "active") if f.startswith("06"))
                 ).read_text()


def _head(compare: str = COMPARE, seconds: str = "30", no_length: bool = False) -> str:
    """The two lines as gpu_burn prints them (drv.cpp:910-914), twice: a child inherits
    the parent's unflushed buffer (seen with the real binary and a stand-in driver)."""
    lead = "Run length not specified in the command line. " if no_length else ""
    return 2 * f"{lead}Using compare file: {compare}\nBurning for {seconds} seconds.\n"


def _findings(text: str) -> tuple[list[str], list[tuple[Status, Action, str]]]:
    run = result_run(STEP, "n1", CommandResult(list(ARGV), 0, text), 30.0)
    return run.notes, [(f.status, f.action, f"{f.message}: {f.observed}")
                       for f in run_findings(run)] + (
        [(Status.PASS, Action.NONE, "figures")] if run.figures else [])


def test_the_planned_command_line_is_what_is_checked() -> None:
    assert gpuburn.asked(ARGV) == (COMPARE, "30")


def test_a_run_that_says_it_did_what_was_asked_is_judged() -> None:
    _, findings = _findings(_head() + BODY)
    assert findings == [(Status.PASS, Action.NONE, "figures")]


@pytest.mark.parametrize(("head", "said"), [
    (_head(compare="compare.fatbin"), f"asked -c {COMPARE}, it used compare.fatbin"),
    (_head(seconds="10", no_length=True), "asked 30 s, it said 10 s"),
    ("GPU Burn\nUsage: gpu-burn [OPTIONS] [TIME]\n", "no compare file it named"),
    ("", "nothing of how long it burned"),
])
def test_a_run_that_did_something_else_is_an_error_never_a_verdict(head: str,
                                                                   said: str) -> None:
    faulty = BODY.replace("GPU 3: OK", "GPU 3: FAULTY")
    notes, findings = _findings(head + faulty)
    assert [(s, a) for s, a, _ in findings] == [(Status.ERROR, Action.INVESTIGATE)], findings
    assert said in findings[0][2]
    assert "gpu_burn did not run as asked" in findings[0][2]
    assert any("FAULTY" in n for n in notes)  # set aside, still shown


def test_run_length_not_found_is_an_error_even_with_the_asked_seconds() -> None:
    _, findings = _findings(_head(no_length=True) + BODY)
    assert findings[0][0] is Status.ERROR
    assert "no seconds" in findings[0][2]


# gpu_burn with a driver but no GPU (the real binary with a stand-in libcuda.so.1 whose
# cuInit answers CUDA_ERROR_NO_DEVICE; the CUDA texts are the stand-in's), exit 19.
NO_GPU = ("sh: 1: nvidia-smi: not found\n"
          "cuInit returned 100 (no CUDA-capable device is detected)\n"
          "Couldn't init CUDA: Error (gpu_burn-drv.cpp:317): no CUDA-capable device is "
          "detected\n"
          "Couldn't init a GPU test: Error (gpu_burn-drv.cpp:112): initialization error\n"
          "No CUDA devices\n")
NO_KERNEL = ("Couldn't init a GPU test: Error in couldn't find compare kernel: "
             f"{COMPARE} (gpu_burn-drv.cpp:241): named symbol not found\n") * 2 + (
    "\n\nNo clients are alive!  Aborting\n")


@pytest.mark.parametrize("tail", [NO_GPU, NO_KERNEL])
def test_a_burn_that_could_not_start_is_an_error_never_a_drain(tail: str) -> None:
    run = result_run(STEP, "n1", CommandResult(list(ARGV), 19, _head() + tail), 1.0)
    findings = run_findings(run)
    assert findings
    assert {(f.status, f.action) for f in findings} == {
        (Status.ERROR, Action.INVESTIGATE)}, findings
