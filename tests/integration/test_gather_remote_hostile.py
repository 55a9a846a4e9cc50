"""``run --nodes --via ssh|srun`` against hostile remote commands: stand-ins
for ``ssh`` and ``srun`` on PATH (scripts written here; no host is contacted) answer as a
healthy node, as one that writes gigabytes and as one that drips a byte at a time with a
child of its own holding the pipe. The gather must end at its deadline, in bounded memory,
with the hostile nodes named and their whole process groups killed, and the healthy
node still judged."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.processes import still_running

CAP = 16 << 20  # GatherSettings.max_report_bytes
RSS_BOUND_KIB = 400 * 1024  # a healthy gather of a few nodes is ~80 MB; one node's cap 16
SLACK_S = 15.0  # interpreter start and a loaded 2-core machine
# the gather's deadline: the good node's stand-in (a Python program, three or four started at
# once) must have answered and each drip one started its child by then on a loaded machine
DEADLINE_S = 10

# Behaves as the node named in its arguments says: good* prints the canned report,
# huge* writes zeros without end (no newline), drip* a space every 0.3 s with a child
# (`sleep`) that holds the same stdout; each child's pid goes to PIDS/<node>.
BEHAVIOUR = """
import json, os, subprocess, sys, time
def behave(node, out, label=b""):
    kind = node.rstrip("0123456789")
    if kind == "good":
        body = json.load(open({report!r}))
        body["node"] = node
        for line in json.dumps(body, indent=1).encode().splitlines():
            out.write(label + line + b"\\n")
        out.flush()
    elif kind == "huge":
        chunk = label + b"0" * (1 << 20)
        while True:
            out.write(chunk)
    else:
        child = subprocess.Popen(["sleep", "600"], stdout=out)
        open(os.path.join({pids!r}, node), "w").write(str(child.pid))
        while True:
            out.write(label + b" ")
            out.flush()
            time.sleep(0.3)
"""

FAKE_SSH = """#!{python}
import sys
{behaviour}
behave(sys.argv[-2], sys.stdout.buffer)
"""

# srun --label: each task's lines as "RANK: line"; one process writes for every node, so
# the good node's report comes first and the hostile ones follow, interleaved by rank.
FAKE_SRUN = """#!{python}
import sys, threading
from ClusterShell.NodeSet import NodeSet
{behaviour}
nodes = list(NodeSet([a for a in sys.argv if a.startswith("--nodelist=")][0][11:]))
lock = threading.Lock()
class Labelled:
    def __init__(self, rank):
        self.rank = rank
        self.fileno = sys.stdout.fileno
    def write(self, data):
        with lock:
            sys.stdout.buffer.write(data)
    def flush(self):
        with lock:
            sys.stdout.buffer.flush()
for rank, node in enumerate(nodes):
    sys.stdout.buffer.write(f"{{rank}}: {{node}}\\n".encode())
good = [(r, n) for r, n in enumerate(nodes) if n.startswith("good")]
for rank, node in good:
    behave(node, Labelled(rank), f"{{rank}}: ".encode())
threads = [threading.Thread(target=behave, args=(n, Labelled(r), f"{{r}}: ".encode()),
                            daemon=True) for r, n in enumerate(nodes) if (r, n) not in good]
for t in threads:
    t.start()
for t in threads:
    t.join()
"""


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("good") / "good.json"
    proc = run_cli("run", "--simulate", "dgx-h100", "--format", "json", "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture
def fakes(tmp_path: Path, report: Path) -> Iterator[Path]:
    """A bin directory with the stand-ins, and PIDS beside it; every child they started
    is killed afterwards whatever the test found."""
    bindir, pids = tmp_path / "bin", tmp_path / "pids"
    bindir.mkdir()
    pids.mkdir()
    behaviour = BEHAVIOUR.format(report=str(report), pids=str(pids))
    for name, text in (("ssh", FAKE_SSH), ("srun", FAKE_SRUN)):
        path = bindir / name
        path.write_text(text.format(python=sys.executable, behaviour=behaviour))
        path.chmod(0o755)
    yield bindir
    for pid_file in pids.iterdir():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text()), 9)


def _gather(bindir: Path, via: str, nodes: str) -> tuple[subprocess.CompletedProcess[str],
                                                          float, int]:
    """The real command in a child of a wrapper that reports the child's peak RSS; at
    most 4 GiB of address space for it (the shared machine's memory)."""
    config = bindir.parent / "config.yaml"
    config.write_text(json.dumps({"cluster": {"connect_timeout_s": 2, "read_timeout_s": 60,
                                              "deadline_s": DEADLINE_S, "retries": 0}}))
    wrapper = textwrap.dedent("""\
        import resource, subprocess, sys
        def cap():
            resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        p = subprocess.run(sys.argv[1:], preexec_fn=cap, capture_output=True, text=True)
        sys.stdout.write(p.stdout)
        sys.stderr.write(p.stderr)
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
        sys.exit(p.returncode)
        """)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", wrapper, sys.executable, "-m", "clusterdiag.agent", "run",
         "--nodes", nodes, "--via", via, "--format", "json", "--config", str(config)],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "PATH": f"{bindir}:/usr/bin:/bin"})
    took = time.monotonic() - started
    *lines, rss = proc.stderr.rstrip("\n").split("\n")
    proc.stderr = "\n".join(lines)
    return proc, took, int(rss)


def _unreachable(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    from clusterdiag.agent.model.nodeset import expand

    data = json.loads(proc.stdout)
    return {node: f["message"] for f in data["cluster_findings"]
            if f["check"] == "cluster.reachability" and f["status"] == "fail"
            for node in expand(f["nodes"])}


def _children_killed(bindir: Path) -> list[int]:
    """The pids the drippers' children still have, waiting up to 30 s for them to go."""
    pids = [int(p.read_text()) for p in (bindir.parent / "pids").iterdir()]
    assert pids, "no dripping node started its child"
    return still_running(pids)


@pytest.mark.slow
def test_hostile_ssh_commands_are_cut_off_and_their_groups_killed(fakes: Path) -> None:
    proc, took, rss = _gather(fakes, "ssh", "good1,huge1,drip1")
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stderr
    print(f"\nssh gather of 3 hostile nodes: {took:.1f} s, peak RSS {rss / 1024:.0f} MiB")
    assert took < DEADLINE_S + SLACK_S, took
    assert rss < RSS_BOUND_KIB, rss
    reasons = _unreachable(proc)
    assert set(reasons) == {"huge1", "drip1"}, reasons
    assert f"larger than {CAP} bytes" in reasons["huge1"], reasons
    assert f"deadline ({DEADLINE_S} s)" in reasons["drip1"], reasons
    nodes = {n["node"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert nodes["good1"]["verdict"] == "pass", nodes["good1"]
    assert _children_killed(fakes) == []


@pytest.mark.slow
def test_hostile_srun_tasks_are_cut_off_and_its_group_killed(fakes: Path) -> None:
    proc, took, rss = _gather(fakes, "srun", "good1,drip1")
    assert "Traceback" not in proc.stderr, proc.stderr
    print(f"\nsrun gather with a dripping task: {took:.1f} s, peak RSS {rss / 1024:.0f} MiB")
    assert took < DEADLINE_S + SLACK_S, took
    reasons = _unreachable(proc)
    assert set(reasons) == {"drip1"}, reasons
    assert f"within {DEADLINE_S} s" in reasons["drip1"], reasons
    nodes = {n["node"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert nodes["good1"]["verdict"] == "pass", nodes["good1"]
    assert _children_killed(fakes) == []
    proc, took, rss = _gather(fakes, "srun", "good1,huge1")
    assert "Traceback" not in proc.stderr, proc.stderr
    print(f"srun gather with a task writing without end: {took:.1f} s, peak RSS "
          f"{rss / 1024:.0f} MiB")
    assert took < DEADLINE_S + SLACK_S, took
    assert rss < RSS_BOUND_KIB, rss
    reasons = _unreachable(proc)
    assert set(reasons) == {"huge1"}, reasons
    assert f"larger than {CAP} bytes" in reasons["huge1"], reasons
    nodes = {n["node"]: n for n in json.loads(proc.stdout)["nodes"]}
    assert nodes["good1"]["verdict"] == "pass", nodes["good1"]
