"""Bad input is one line and exit 2, in bounded time and memory.

Each case runs the real command under a 1 GiB address-space limit and a 60 s timeout: a
YAML alias bomb or a FIFO must not get the chance to take the machine with it.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

LIMIT_BYTES = 1 << 30
LIMIT_S = 60.0
# Refused as soon as read: interpreter start-up and one parse, with slack for a loaded
# 2-core machine; a FIFO waited on or a bomb expanded would hold it until LIMIT_S.
BOUND_S = 30.0


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def run_bounded(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The command as a user runs it, with a memory and a time bound it must stay in."""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "clusterdiag.agent", *args],
                          capture_output=True, text=True, timeout=LIMIT_S, check=False,
                          preexec_fn=_limited)
    return proc, time.monotonic() - started


def assert_one_line(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr[-2000:]
    assert len(lines[0]) < 400, lines[0][:400]
    for word in words:
        assert word in lines[0], lines[0]


def _alias_bomb(key: str) -> str:
    """Nine levels of nine aliases: 9**9 (387 million) strings once expanded."""
    lines = [f"{key}:", '  - &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"  - &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


CONFIGS = {
    "alias bomb under a typed key": (_alias_bomb("budget_s"), "budget_s"),
    "alias bomb under a check parameter": (
        "checks:\n  gpu.processes:\n    " + _alias_bomb("job_gpus").replace("\n  ", "\n      "),
        "job_gpus"),
    "deep YAML": ("budget_s: " + "[" * 5000 + "]" * 5000 + "\n", "nested"),
    "agent_url with a stray brace": ('cluster:\n  agent_url: "http://{node:9464"\n',
                                     "cluster.agent_url"),
    "agent_url with an unknown field": ('cluster:\n  agent_url: "http://{nodes}:9464"\n',
                                        "cluster.agent_url"),
    "agent_url reaching into the name": (
        'cluster:\n  agent_url: "http://{node.__class__}:9464"\n', "cluster.agent_url"),
    "agent_url by position": ('cluster:\n  agent_url: "http://{0}:9464"\n',
                              "cluster.agent_url"),
    "wrong-typed list items in a check parameter": (
        "checks:\n  gpu.processes:\n    fail_modes: [1, {a: b}]\n",
        "checks.gpu.processes.fail_modes"),
    "NaN in a check threshold": ("checks:\n  gpu.temperature:\n    min_slowdown_margin_c: .nan\n",
                                 "checks.gpu.temperature.min_slowdown_margin_c"),
    "a million retries": ("cluster:\n  retries: 1000000\n", "cluster.retries"),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_bad_config_is_one_line(case: str, tmp_path: Path) -> None:
    text, word = CONFIGS[case]
    config = tmp_path / "config.yaml"
    config.write_text(text)
    proc, seconds = run_bounded("run", "--simulate", "dgx-h100", "--config", str(config))
    assert_one_line(proc, str(config), word)
    assert seconds < BOUND_S


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_config_that_is_not_a_file(special: str, tmp_path: Path) -> None:
    path = tmp_path / "fifo"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path = Path(special)
    proc, seconds = run_bounded("run", "--simulate", "dgx-h100", "--config", str(path))
    assert_one_line(proc, str(path), "not a regular file")
    assert seconds < BOUND_S


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_merge_input_that_is_not_a_file(special: str, tmp_path: Path) -> None:
    """A FIFO or a device named on the command line is the user's mistake, not a bad node
    report: one line naming it, exit 2, without waiting for a writer or reading forever."""
    path = tmp_path / "fifo.json"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path = Path(special)
    proc, seconds = run_bounded("report", "merge", str(path))
    assert_one_line(proc, str(path), "not a regular file")
    assert seconds < BOUND_S


@pytest.mark.parametrize("nodes", [
    "a[1-99999]b[1-99999]",
    ",".join(f"r{i}n[1-99999]" for i in range(20)),
    "n[" + ",".join(f"{i * 100000 + 1}-{i * 100000 + 99999}" for i in range(20)) + "]",
])
def test_node_sets_are_capped_in_total(nodes: str) -> None:
    proc, seconds = run_bounded("run", "--nodes", nodes, "--via", "agent")
    assert_one_line(proc, "--nodes", "100000")
    assert seconds < BOUND_S


@pytest.mark.parametrize(("fault", "word"), [
    ("{node: n1, kind: xid, gpu: 1, age_s: .nan}", "age_s"),
    ("{node: n1, kind: xid, gpu: 1, age_s: .inf}", "age_s"),
    ("{node: n1, kind: xid, gpu: 1, code: .nan}", "code"),
    ("{node: n1, kind: xid, gpu: 1, at_s: .nan}", "at_s"),
    ("{node: n1, kind: nvlink_down, gpu: 1, link: 2, from_s: .nan}", "from_s"),
])
def test_nan_in_spec_fields(fault: str, word: str, tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"nodes:\n  - names: n1\n    profile: dgx-h100\nfaults:\n  - {fault}\n")
    proc, seconds = run_bounded("run", "--simulate", str(spec))
    assert_one_line(proc, str(spec), word)
    assert seconds < BOUND_S


def test_spec_node_set_capped_in_total(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n  - names: a[1-99999]b[1-99999]\n    profile: dgx-h100\n")
    proc, seconds = run_bounded("run", "--simulate", str(spec))
    assert_one_line(proc, str(spec), "100000")
    assert seconds < BOUND_S
