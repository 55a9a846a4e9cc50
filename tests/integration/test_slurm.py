"""The prolog, epilog and health check under a real Slurm: munged, slurmctld and four slurmd
daemons on this machine (``slurmd -N``), each node's hardware simulated from a spec chosen
by SLURMD_NODENAME, everything under a temporary directory and on loopback.

The wrappers are what a site installs, with the venv's clusterdiag by absolute path
(prologs have no PATH) and the spec read from a file the test switches to inject or
remove a fault. Everything started is stopped by PID, also when a test fails.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.daemon.counterwindow import COUNTER_WINDOW_FILE
from clusterdiag.agent.daemon.state import AGENT, CLEAR_DIR, EVENTS, REPORT, SNAPSHOT
from clusterdiag.agent.health import store
from clusterdiag.agent.health.lifecycle import Health, Incident, Outcome, Result, State
from clusterdiag.agent.slurm.reason import Reason, Verb, parse, write
from clusterdiag.agent.slurm.scontrol import Scontrol
from tests.conftest import REPO
from tests.integration.daemon_helpers import AgentProc, get

# One Slurm cluster (munge, slurmctld, a slurmd per node) serves the module: its tests run
# on one worker, one after another.
pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.xdist_group("slurm")]

NODES = ("n1", "n2", "n3", "n4")
BINARIES = ("munged", "mungekey", "slurmctld", "slurmd", "scontrol", "sbatch", "srun", "sinfo")
HEALTH_INTERVAL_S = 5
# Long enough that a health check sees the validation wait out the hold-down: the first
# validation starts a health check after the drain and takes seconds of interpreter
# start and checks on a loaded machine (15 s was crossed before the wait was seen).
HOLD_DOWN_S = 30
REASON = "clusterdiag: nvlink.links_up gpu3 17/18 (down: 7)"
OPERATOR = "op: bad fan [ticket 12]"
SPECS = {
    "healthy": "nodes:\n  - {names: \"n[1-4]\", profile: dgx-h100}\n",
    "faulty": ("nodes:\n  - {names: \"n[1-4]\", profile: dgx-h100}\nfaults:\n"
               "  - {node: n3, kind: nvlink_down, gpu: 3, link: 7}\n"
               "  - {node: n2, kind: gpu_lost, gpu: 0}\n"),
}
WRAPPER = """#!/bin/sh
# The shipped wrapper, told where the venv's clusterdiag is and where to log, plus the
# test's switches: which spec the nodes are, and whether the health check may act yet.
# Each node its own config, for its own state directory: the four share one machine.
export CLUSTERDIAG={clusterdiag} CLUSTERDIAG_LOG={dir}/{program}.log SLURM_CONF={conf}
{gate}read -r SPEC < {dir}/spec-path
exec {shipped} --simulate "$SPEC" --config {dir}/config-"$SLURMD_NODENAME".yaml
"""


def _missing() -> list[str]:
    return [b for b in BINARIES if shutil.which(b, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]


def _free_ports(count: int) -> list[int]:
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        socks.append(sock)
    ports = [s.getsockname()[1] for s in socks]
    for sock in socks:
        sock.close()
    return ports


class Cluster:
    """The daemons, their files, and the client commands pointed at them."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.conf = base / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.procs: list[subprocess.Popen[bytes]] = []

    def cmd(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                              env=self.env, check=False)

    def spawn(self, name: str, *argv: str) -> None:
        with open(self.base / f"{name}.out", "wb") as out:
            self.procs.append(subprocess.Popen(list(argv), stdout=out, stderr=out,
                                               stdin=subprocess.DEVNULL, env=self.env,
                                               start_new_session=True))

    def stop(self) -> None:
        """Every job cancelled, then every daemon by its PID: TERM, then KILL."""
        if self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                self.cmd("scancel", "--user=root", timeout=5)  # hangs without slurmctld
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def use(self, spec: str) -> None:
        (self.base / "spec-path").write_text(str(self.base / f"{spec}.yaml") + "\n")

    def health(self, on: bool) -> None:
        gate = self.base / "health-off"
        if on:
            gate.unlink(missing_ok=True)
        else:
            gate.touch()

    def node(self, name: str) -> tuple[str, str | None]:
        from clusterdiag.agent.slurm.scontrol import parse_node

        state = parse_node(name, self.cmd("scontrol", "show", "node", name, "-o").stdout)
        return state.state, state.reason

    def wait(self, what: str, ready: Callable[[], bool], timeout: float = 60,
             detail: Callable[[], str] = str) -> None:
        until = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > until:
                logs = "\n".join(f"--- {p.name}\n{p.read_text()[-1500:]}"
                                 for p in sorted(self.base.glob("*.log")))
                raise AssertionError(f"timed out waiting for {what}: {detail()}\n{logs}")
            time.sleep(0.2)

    def plant(self, name: str, *faults: str) -> None:
        """Switch every node to a spec of the four nodes with ``faults`` (flow mappings)."""
        (self.base / f"{name}.yaml").write_text(
            "nodes:\n  - {names: \"n[1-4]\", profile: dgx-h100}\nfaults:\n"
            + "".join(f"  - {f}\n" for f in faults) if faults else SPECS["healthy"])
        self.use(name)

    def state_dir(self, node: str) -> Path:
        return self.base / "state-agent" / node

    def lifecycle(self, node: str) -> Health:
        """The node's lifecycle as the agent reads it for ``GET /v1/health``."""
        return store.HealthFile(self.state_dir(node)).current()

    def forget(self, node: str) -> None:
        (self.state_dir(node) / store.NAME).unlink(missing_ok=True)

    def events(self, node: str) -> list[str]:
        """The health check's log lines for ``node``, in order, each from its event on."""
        return [line.removeprefix("clusterdiag healthcheck: ")
                for line in _read(self.base / "healthcheck.log").splitlines()
                if f" node={node} " in line + " "]

    def restart(self, name: str) -> None:
        """Stop the daemon ``name`` by its PID and start it again as before."""
        index = next(i for i, p in enumerate(self.procs) if p.args[-1] == name)
        proc = self.procs.pop(index)
        proc.terminate()
        proc.wait(timeout=30)
        self.spawn(f"slurmd-{name}", *[str(a) for a in proc.args])

    def job(self, job_id: str) -> dict[str, str]:
        text = self.cmd("scontrol", "show", "job", job_id, "-o").stdout
        return dict(f.split("=", 1) for f in text.split() if "=" in f)


def _write_files(base: Path, ports: list[int]) -> None:
    munge = base / "munge"
    for sub in ("run", "log", "lib"):
        (munge / sub).mkdir(parents=True)
    for sub in ("log", "lib"):
        (munge / sub).chmod(0o700)
    for sub in ("state", "spool", "run", "log"):
        (base / sub).mkdir()
    nodes = "\n".join(
        f"NodeName={n} NodeHostname=localhost NodeAddr=127.0.0.1 Port={ports[i + 1]} "
        f"CPUs=2 RealMemory=1000 Weight={1 if n == 'n3' else 10}"
        for i, n in enumerate(NODES))
    clusterdiag = Path(sys.executable).parent / "clusterdiag"
    # cred_expire: a requeued job waits cred_expire + 1 s before it may start again
    # (120 s by default), which is how long the test would wait for the requeue.
    (base / "slurm.conf").write_text(f"""ClusterName=cdtest
SlurmctldHost=localhost
SlurmctldPort={ports[0]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge}/run/munge.socket.2,cred_expire=10
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool/%n
SlurmctldPidFile={base}/run/slurmctld.pid
SlurmdPidFile={base}/run/slurmd-%n.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=1
SchedulerParameters=nohold_on_prolog_fail
PrologFlags=Alloc
Prolog={base}/prolog.sh
Epilog={base}/epilog.sh
HealthCheckProgram={base}/healthcheck.sh
HealthCheckInterval={HEALTH_INTERVAL_S}
{nodes}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    for program in ("prolog", "epilog", "healthcheck"):
        gate = (f"[ -e {base}/health-off ] && exit 0\n" if program == "healthcheck" else "")
        path = base / f"{program}.sh"
        path.write_text(WRAPPER.format(
            conf=base / "slurm.conf", dir=base, gate=gate, clusterdiag=clusterdiag,
            program=program, shipped=REPO / f"systemd/clusterdiag-{program}.sh"))
        path.chmod(0o755)
    for name, text in SPECS.items():
        (base / f"{name}.yaml").write_text(text)
    for name in NODES:
        (base / "state-agent" / name).mkdir(parents=True)
        (base / f"config-{name}.yaml").write_text(json.dumps(
            {"agent": {"state_dir": str(base / "state-agent" / name)},
             "epilog": {"grace_s": 2},
             # Four prologs at once on a small shared CI machine: the default 8 s leaves
             # the collection too little once Python has started (PrologEpilogTimeout is
             # unset).
             "prolog": {"budget_s": 20},
             # A hold-down of seconds, not minutes; two of four nodes drained at once is a
             # fleet event (the default share), not the circuit breaker (the default 20 %
             # is one other node of four).
             "health": {"hold_down_s": {"fabric.manager": HOLD_DOWN_S},
                        "breaker_share": 0.5}}))


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    missing = _missing()
    if missing:
        pytest.skip(f"Slurm/munge not installed: {', '.join(missing)}")
    if os.geteuid() != 0:
        pytest.skip("a real Slurm with SlurmdUser=root needs root")
    # Not pytest's tmp_path: parallel pytest sessions prune each other's numbered dirs.
    base = Path(tempfile.mkdtemp(prefix="clusterdiag-slurm-"))
    base.chmod(0o755)  # munged refuses a socket under a directory others cannot enter
    _write_files(base, _free_ports(len(NODES) + 1))
    cluster = Cluster(base)
    cluster.use("healthy")
    cluster.health(False)
    munge = base / "munge"
    try:
        subprocess.run(["mungekey", "--create", f"--keyfile={munge}/munge.key", "--bits=1024"],
                       check=True, capture_output=True, timeout=30)
        cluster.spawn("munged", "munged", "-F", f"--key-file={munge}/munge.key",
                      f"--socket={munge}/run/munge.socket.2",
                      f"--pid-file={munge}/run/munged.pid",
                      f"--log-file={munge}/log/munged.log", f"--seed-file={munge}/lib/seed")
        cluster.wait("munged", lambda: (munge / "run/munge.socket.2").exists(), 30)
        cluster.spawn("slurmctld", "slurmctld", "-D", "-i", "-f", str(cluster.conf))
        for name in NODES:
            (base / "spool" / name).mkdir()
            cluster.spawn(f"slurmd-{name}", "slurmd", "-D", "-f", str(cluster.conf), "-N", name)
        cluster.wait("four idle nodes", lambda: cluster.cmd(
            "sinfo", "-h", "-N", "-o", "%N %T").stdout.split() == [
                x for n in NODES for x in (n, "idle")], 60)
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def test_jobs_run_on_healthy_nodes_after_the_prolog_passes(cluster: Cluster) -> None:
    cluster.use("healthy")
    proc = cluster.cmd("srun", "-N4", "--time=1", "sh", "-c", "echo $SLURMD_NODENAME",
                       timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.split()) == list(NODES)
    log = (cluster.base / "prolog.log").read_text()
    for name in NODES:
        assert re.search(rf"clusterdiag prolog: pass job=\d+ user=root node={name} ", log)
    cluster.wait("the epilogs to pass", lambda: [cluster.node(n)[0] for n in NODES]
                 == ["IDLE"] * 4, 90)
    assert _read(cluster.base / "epilog.log").count("clusterdiag epilog: pass") >= 4


def test_a_faulty_node_drains_the_job_runs_elsewhere_and_health_check_resumes_it(
        cluster: Cluster) -> None:
    cluster.use("healthy")
    cluster.health(False)
    assert cluster.cmd("scontrol", "update", "NodeName=n2", "State=DRAIN",
                       f"Reason={OPERATOR}").returncode == 0
    try:
        cluster.use("faulty")
        out = cluster.base / "where.out"
        sub = cluster.cmd("sbatch", "--parsable", "-N1", f"--output={out}", "--wrap",
                          "echo $SLURMD_NODENAME")
        assert sub.returncode == 0, sub.stderr
        job_id = sub.stdout.strip().split(";")[0]
        # a failed prolog, the requeue's cred_expire wait, another prolog: on a loaded
        # machine each prolog is seconds of interpreter start-up and collection
        cluster.wait("the job to complete", lambda: cluster.job(job_id).get(
            "JobState") == "COMPLETED", 180, lambda: str(cluster.job(job_id)))
        # n3 (lowest weight) got it first; its prolog failed and drained it with our reason
        state, reason = cluster.node("n3")
        assert "DRAIN" in state
        assert reason == REASON
        assert parse(reason) == Reason(Verb.NONE, "nvlink.links_up", "gpu3", "17/18 (down: 7)")
        assert int(cluster.job(job_id)["Restarts"]) >= 1
        ran_on = out.read_text().strip()
        assert ran_on in ("n1", "n4")
        prolog_log = (cluster.base / "prolog.log").read_text()
        assert f"FAIL node not ready job={job_id} user=root node=n3" in prolog_log
        # The periodic health check: n3 still fails (reason kept); n2 fails too, but an
        # operator drained it, so its reason is never replaced.
        cluster.health(True)
        cluster.wait("a health check on n2", lambda: "node=n2" in _read(
            cluster.base / "healthcheck.log"), 12 * HEALTH_INTERVAL_S)
        assert cluster.node("n2")[1] == OPERATOR
        assert cluster.node("n3")[1] == REASON
        # The fault is repaired: the health check lifts its own drain, not the operator's.
        cluster.use("healthy")
        cluster.wait("n3 idle again", lambda: cluster.node("n3")[0] == "IDLE",
                     12 * HEALTH_INTERVAL_S)
        cluster.wait("n3 responding", lambda: cluster.cmd(
            "sinfo", "-h", "-n", "n3", "-o", "%T").stdout.strip() == "idle", 30)
        assert cluster.node("n2") == ("IDLE+DRAIN", OPERATOR)
        again = cluster.cmd("srun", "-w", "n3", "--time=1", "sh", "-c",
                            "echo $SLURMD_NODENAME", timeout=60)
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == "n3"
        # ... and only once the validation NVLink calls for (qualify's all-reduce and
        # device-to-device copies) passed, started by a health check on the drained node
        started, resumed = _order(cluster.events("n3"), "validation started", "resumed ")
        assert started < resumed
        health = cluster.lifecycle("n3")
        assert (health.state, health.last and health.last.result) == (State.HEALTHY,
                                                                      Result.PASSED)
        assert health.last.detail == "allreduce, d2d passed"
        assert health.totals == {"nvlink": 1}
    finally:
        cluster.health(False)
        cluster.use("healthy")
        for name in NODES:
            cluster.cmd("scontrol", "update", f"NodeName={name}", "State=RESUME")


def _order(events: list[str], *wanted: str) -> list[int]:
    """Where each wanted event first occurs (an event starting with it), failing when one
    is missing: increasing when they happened in that order."""
    where = []
    for want in wanted:
        hits = [i for i, e in enumerate(events) if e.startswith(want)]
        assert hits, f"no {want!r} among {events}"
        where.append(hits[0])
    return where


def test_a_state_fault_cleared_waits_its_hold_down_across_a_restart_then_resumes(
        cluster: Cluster) -> None:
    """Fabric Manager down on n1: drained by the health check, an incident opened in n1's
    lifecycle. Cleared, the node stays out through the hold-down (its validation waits),
    also across a restart of n1's slurmd, which starts the health checks: the lifecycle
    is read back from health.json, so the hold-down does not start again; then resumed."""
    cluster.health(False)
    cluster.forget("n1")
    cluster.plant("fm-down", "{node: n1, kind: fabric_manager_down}")
    try:
        cluster.health(True)
        cluster.wait("n1 drained", lambda: (cluster.node("n1")[1] or "").startswith(
            "clusterdiag: fabric.manager node ") and cluster.lifecycle("n1").open is not None,
            12 * HEALTH_INTERVAL_S, lambda: str(cluster.node("n1")))
        opened = cluster.lifecycle("n1")
        assert opened.state is State.DRAINED
        assert opened.open is not None
        assert (opened.open.check, opened.open.fleet) == ("fabric.manager", False)
        cluster.use("healthy")
        cluster.wait("the hold-down", lambda: any(
            e.startswith("not resuming ") and "in its hold-down for" in e
            for e in cluster.events("n1")), 8 * HEALTH_INTERVAL_S, lambda: str(
                cluster.events("n1")))
        assert "DRAIN" in cluster.node("n1")[0]
        cluster.restart("n1")
        assert cluster.lifecycle("n1").open == opened.open  # read back after the restart
        cluster.wait("n1 resumed", lambda: cluster.node("n1")[0] == "IDLE",
                     HOLD_DOWN_S + 12 * HEALTH_INTERVAL_S, lambda: str(cluster.events("n1")))
        resumed = time.time()
        assert resumed >= opened.open.at + HOLD_DOWN_S
        events = cluster.events("n1")
        drained, started, back = _order(events, "drained ", "validation started", "resumed ")
        (waiting,) = _order([e if "in its hold-down for" in e else "" for e in events],
                            "not resuming ")
        assert drained < started < waiting < back
        assert not any("before its incident was recorded" in e for e in events)
        health = cluster.lifecycle("n1")
        assert health.state is State.HEALTHY
        assert health.last is not None
        assert (health.last.result, health.last.detail) == (
            Result.PASSED, "the check passes, after its hold-down")
        assert health.totals == {"fabric.manager": 1}
    finally:
        cluster.health(False)
        cluster.use("healthy")
        cluster.cmd("scontrol", "update", "NodeName=n1", "State=RESUME")


def test_a_validation_that_fails_keeps_the_node_out_with_its_figure(cluster: Cluster) -> None:
    """A thermal slowdown on n4's GPU 2 drains it; its validation is qualify's burn
    (gpu_compute). With the slowdown gone but the GPU slow (what no state check sees), the
    validation fails: n4 stays drained, its reason with the burn's figure. Once the GPU
    computes at speed again, the next validation passes and n4 is resumed."""
    cluster.health(False)
    cluster.forget("n4")
    cluster.plant("hot", "{node: n4, kind: thermal_slowdown, gpu: 2}")
    try:
        cluster.health(True)
        cluster.wait("n4 drained", lambda: (cluster.node("n4")[1] or "").startswith(
            "clusterdiag: gpu.clock_events gpu2 "), 12 * HEALTH_INTERVAL_S)
        cluster.plant("slow", "{node: n4, kind: gpu_slow, gpu: 2}")
        cluster.wait("the validation to fail", lambda: "qualify.gpu_compute" in (
            cluster.node("n4")[1] or ""), 12 * HEALTH_INTERVAL_S, lambda: str(
                cluster.events("n4")))
        state, reason = cluster.node("n4")
        assert "DRAIN" in state
        parsed = parse(reason or "")
        assert parsed is not None
        assert (parsed.verb, parsed.check, parsed.component) == (Verb.NONE,
                                                                 "gpu.clock_events", "gpu2")
        # the reason has the figure whole within Slurm's length, the full text the lifecycle
        assert re.search(r"^qualify\.gpu_compute gpu2 (.*: )?\d+ < \d+ Gflop/s "
                         r"\(peers median\)$", parsed.detail), parsed.detail
        health = cluster.lifecycle("n4")
        assert health.last is not None
        assert health.last.result is Result.FAILED
        assert re.search(r"^qualify\.gpu_compute gpu2 .*; observed [\d.]+; expected "
                         r"\{\"peers_median\":[\d.]+,", health.last.detail), health.last.detail
        assert health.open is not None
        assert health.open.family == "thermal_power"
        assert not any(e.startswith("resumed ") for e in cluster.events("n4"))
        cluster.use("healthy")
        cluster.wait("n4 resumed", lambda: cluster.node("n4")[0] == "IDLE",
                     12 * HEALTH_INTERVAL_S, lambda: str(cluster.events("n4")))
        health = cluster.lifecycle("n4")
        assert health.last is not None
        assert (health.state, health.last.result, health.last.detail) == (
            State.HEALTHY, Result.PASSED, "gpu_compute passed")
    finally:
        cluster.health(False)
        cluster.use("healthy")
        cluster.cmd("scontrol", "update", "NodeName=n4", "State=RESUME")


def _passes(cluster: Cluster, node: str) -> int:
    return sum(e.startswith("pass ") for e in cluster.events(node))


def _struck(node: str, family: str, check: str, component: str, *ago_s: float) -> Health:
    """A node's lifecycle after earlier drains of ``family`` this week, each validated
    and resumed: its strikes."""
    health = Health()
    for ago in ago_s:
        at = time.time() - ago
        health.drain(Incident(family, check, component, "earlier", at))
        health.start(at + 60)
        health.finish(Outcome(Result.PASSED, "earlier", at + 120))
    return health


def test_a_third_drain_holds_for_repair_and_other_reasons_stay_untouched(
        cluster: Cluster) -> None:
    """n3 was drained for NVLink twice this week; a third NVLink drain holds it for
    repair, and it is not resumed once the link is back. Meanwhile an operator's drain
    (n2) and Slurm's ``Prolog error`` (n4) are never touched by the health check."""
    cluster.health(False)
    before = len(cluster.events("n3"))
    store.save(cluster.state_dir("n3"), _struck("n3", "nvlink", "nvlink.links_up", "gpu3",
                                                3 * 86_400, 86_400))
    cluster.use("faulty")  # n3's NVLink down (and n2's GPU lost, under its operator's drain)
    assert cluster.cmd("scontrol", "update", "NodeName=n2", "State=DRAIN",
                       f"Reason={OPERATOR}").returncode == 0
    assert cluster.cmd("scontrol", "update", "NodeName=n4", "State=DRAIN",
                       "Reason=Prolog error").returncode == 0
    try:
        cluster.health(True)
        cluster.wait("n3 held", lambda: (cluster.node("n3")[1] or "").startswith(
            "clusterdiag: repair "), 12 * HEALTH_INTERVAL_S, lambda: str(cluster.node("n3")))
        assert cluster.node("n3")[1] == ("clusterdiag: repair nvlink.links_up gpu3 "
                                         "(3 drains in 7 d)")
        health = cluster.lifecycle("n3")
        assert health.state is State.HELD
        assert health.open is not None
        assert (health.open.family, health.open.fleet) == ("nvlink", False)
        cluster.use("healthy")
        seen = _passes(cluster, "n3")
        cluster.wait("three clean health checks on n3", lambda: _passes(cluster, "n3")
                     >= seen + 3, 12 * HEALTH_INTERVAL_S)
        assert cluster.node("n3")[1] == ("clusterdiag: repair nvlink.links_up gpu3 "
                                         "(3 drains in 7 d)")
        assert "DRAIN" in cluster.node("n3")[0]
        assert not any(e.startswith(("resumed ", "validation started"))
                       for e in cluster.events("n3")[before:])
        assert cluster.lifecycle("n3").state is State.HELD
        assert cluster.node("n2") == ("IDLE+DRAIN", OPERATOR)
        assert cluster.node("n4") == ("IDLE+DRAIN", "Prolog error")
        assert any(e.startswith("not resuming: drained for a reason that is not")
                   for e in cluster.events("n4"))
    finally:
        cluster.health(False)
        cluster.use("healthy")
        for name in ("n2", "n3", "n4"):
            cluster.cmd("scontrol", "update", f"NodeName={name}", "State=RESUME")
        cluster.forget("n3")


def test_the_same_fault_on_half_the_fleet_within_minutes_is_a_fleet_event_not_a_strike(
        cluster: Cluster) -> None:
    """Fabric Manager down on n1, then on n2 too within the fleet event window (a driver
    roll-out): n1's drain, alone when it happened, reads as its own; n2's finds n1's and
    is over the share (two of four), a fleet event, no strike. Once the fault is gone,
    the next health checks judge n1's drain against the fleet again: both drains are the
    fleet event, and each node keeps the one strike it had this week.

    Meanwhile n1's agent daemon (its own config and state directory) serves the drained
    node's lifecycle, and a restart of the agent loses none of it."""
    both = ("n1", "n2")
    cluster.health(False)
    for name in both:
        store.save(cluster.state_dir(name), _struck(name, "fabric.manager", "fabric.manager",
                                                    "node", 86_400))
    cluster.plant("fm-n1", "{node: n1, kind: fabric_manager_down}")
    agent = _agent(cluster, "n1", "fm-n1")  # started while the node drains
    try:
        cluster.health(True)
        _drained_again(cluster, "n1")
        assert cluster.lifecycle("n1").incidents[-1].fleet is False
        cluster.plant("fm-both", "{node: n1, kind: fabric_manager_down}",
                      "{node: n2, kind: fabric_manager_down}")
        _drained_again(cluster, "n2")
        last = cluster.lifecycle("n2").incidents[-1]
        assert (last.check, last.fleet) == ("fabric.manager", True), last
        assert cluster.lifecycle("n2").count("fabric.manager", 7 * 86_400, time.time()) == 1
        for name in both:
            assert cluster.lifecycle(name).state is State.DRAINED
            assert (cluster.node(name)[1] or "").startswith("clusterdiag: fabric.manager ")
        # The fault still there, n1's lifecycle stands still: the agent serves it, and
        # serves the same after a restart (SIGTERM, started again).
        agent.wait_ready()
        served = _served(agent)
        assert served == store.to_dict(cluster.lifecycle("n1"))
        assert (served["state"], served["open"]["check"], served["totals"]) == (
            "drained", "fabric.manager", {"fabric.manager": 2})
        assert agent.stop() == 0, agent.log()
        agent = _agent(cluster, "n1", "fm-both")
        agent.wait_ready()
        assert _served(agent) == served
        status, metrics, _ = get(f"{agent.url}/metrics")
        assert status == 200
        assert re.search(r'^clusterdiag_health_state\{state="drained"\} 1\.0$',
                         metrics.decode(), re.MULTILINE), metrics.decode()
        _stop(agent)
        # The fault gone, the next clean health check of each node judges its recent own
        # drains against the fleet again (healthcheck.rejudge) before its way back.
        seen = {n: len(cluster.events(n)) for n in both}
        cluster.use("healthy")
        cluster.wait("a clean health check on n1 and n2", lambda: all(
            any(e.startswith("validation started") for e in cluster.events(n)[seen[n]:])
            for n in both), 12 * HEALTH_INTERVAL_S,
            lambda: str({n: cluster.events(n)[seen[n]:] for n in both}))
        now = time.time()
        judged = {n: ([i.fleet for i in cluster.lifecycle(n).incidents[1:]],
                      cluster.lifecycle(n).count("fabric.manager", 7 * 86_400, now))
                  for n in both}
        assert judged == {"n1": ([True], 1), "n2": ([True], 1)}, (
            judged, {n: cluster.events(n)[seen[n]:] for n in both})
    finally:
        _stop(agent)
        cluster.health(False)
        cluster.use("healthy")
        for name in both:
            cluster.cmd("scontrol", "update", f"NodeName={name}", "State=RESUME")
            cluster.forget(name)


def _drained_again(cluster: Cluster, node: str) -> None:
    """Until ``node``'s lifecycle has its second incident: drained after its strike."""
    cluster.wait(f"{node} drained", lambda: len(cluster.lifecycle(node).incidents) == 2,
                 12 * HEALTH_INTERVAL_S, lambda: str(cluster.node(node)))


def _agent(cluster: Cluster, node: str, spec: str) -> AgentProc:
    """``clusterdiag agent`` as ``node`` of the spec, with the node's config and so its
    state directory, listening on a free loopback port (no token: loopback needs none
    unless one is configured). Every 30 s (the default interval): a collection or two
    while the test asks it, little taken from the health checks' CPU."""
    return AgentProc(cluster.base, "--node", node, "--config",
                     str(cluster.base / f"config-{node}.yaml"),
                     spec=str(cluster.base / f"{spec}.yaml"), interval=30,
                     state=cluster.state_dir(node))


def _served(agent: AgentProc) -> dict[str, Any]:
    status, body, _ = get(f"{agent.url}/v1/health")
    assert status == 200, body
    served: dict[str, Any] = json.loads(body)
    return served


def _stop(agent: AgentProc) -> None:
    """The agent stopped and its files gone from the node's state directory: while fresh
    (two intervals), a report it left would stand in for the node's own checks, in the
    next prolog (agent_report.py) and in the health check's ``may_resume``."""
    agent.stop()
    for name in (REPORT, AGENT, SNAPSHOT, EVENTS, COUNTER_WINDOW_FILE):
        (agent.state / name).unlink(missing_ok=True)
    shutil.rmtree(agent.state / CLEAR_DIR, ignore_errors=True)


def test_a_hostile_reason_reads_back_the_same_through_scontrol(cluster: Cluster) -> None:
    """What ``write`` makes of hostile text is what ``scontrol show node`` gives back and
    what ``parse`` reads: quotes, ``=``, brackets, shell and line breaks included."""
    reason = Reason(Verb.EPILOG, "gpu.xid", "gpu1 x=y",
                    'Xid 79 "pid=4711" [op@x] a=b; $(reboot) `id` \\ \n Reason=z "')
    text = write(reason)
    scontrol = Scontrol(environ=cluster.env)
    try:
        scontrol.drain("n4", text)
        read = scontrol.show_node("n4")
        assert read.reason == text
        assert parse(read.reason) == reason
    finally:
        cluster.cmd("scontrol", "update", "NodeName=n4", "State=RESUME")


def _read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def test_a_job_sharing_a_node_is_not_failed_for_the_other_jobs_gpu_process(
        cluster: Cluster) -> None:
    """Two one-CPU jobs on n4 (no GRES: Slurm gives the prolog no GPU list). The second
    job's prolog sees the first job's process on GPU 3, attributed to it by its cgroup,
    and must not judge it: the job starts, n4 stays undrained."""
    cluster.use("healthy")
    cluster.health(False)
    first = cluster.cmd("sbatch", "--parsable", "-w", "n4", "-n1", "--time=2",
                        "--output=/dev/null", "--wrap", "sleep 120")
    assert first.returncode == 0, first.stderr
    first_id = first.stdout.strip().split(";")[0]
    try:
        cluster.wait("the first job to run", lambda: cluster.job(first_id).get(
            "JobState") == "RUNNING", 120, lambda: str(cluster.job(first_id)))
        (cluster.base / "shared.yaml").write_text(
            "nodes:\n  - {names: \"n[1-4]\", profile: dgx-h100}\nfaults:\n"
            f"  - {{node: n4, kind: leftover_process, gpu: 3, job: {first_id}, pid: 5003}}\n")
        cluster.use("shared")
        second = cluster.cmd("srun", "-w", "n4", "-n1", "--time=1", "sh", "-c",
                             "echo $SLURM_JOB_ID", timeout=60)
        assert second.returncode == 0, second.stderr
        second_id = second.stdout.strip()
        prolog_log = (cluster.base / "prolog.log").read_text()
        assert re.search(rf"clusterdiag prolog: pass job={second_id} user=root node=n4 ",
                         prolog_log), prolog_log[-2000:]
        assert "DRAIN" not in cluster.node("n4")[0]
    finally:
        cluster.use("healthy")  # the first job's own epilog must not see its process
        cluster.cmd("scancel", first_id)
        cluster.wait("n4 idle again", lambda: cluster.node("n4")[0] == "IDLE", 120)
        cluster.cmd("scontrol", "update", "NodeName=n4", "State=RESUME")


QUALIFY_SPEC = ("nodes:\n  - {names: \"n[1-4]\", profile: dgx-h100}\nfaults:\n"
                "  - {node: n3, kind: cable_slow, hca: mlx5_4}\n")
TOOLS = ("all_reduce_perf", "ib_write_bw", "nvidia-smi", "ibstat")


def test_qualify_inside_an_allocation_names_the_bad_node_and_drains_it(
        cluster: Cluster) -> None:
    """``clusterdiag qualify --tests pairs,rails --drain`` inside ``salloc -N4``: every
    tool is launched by srun on its slurmd node (a wrapper on PATH runs the simulated tool
    for SLURMD_NODENAME; a two-node step prints nccl-tests' table from rank 0). n3's
    mlx5_4 cable is slow: the pairs and the rails name n3, not its partner n4, and n3 is
    drained with the rail's figure while n4 stays up."""
    cluster.use("healthy")
    cluster.health(False)
    base = cluster.base
    bin_dir = base / "qualify-bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in TOOLS:
        wrapper = bin_dir / tool
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} -m "
                           f"clusterdiag.agent.sim.tool_main {tool} \"$@\"\n")
        wrapper.chmod(0o755)
    (base / "qualify.yaml").write_text(QUALIFY_SPEC)
    (base / "qualify-config.yaml").write_text(json.dumps(
        {"qualify": {"srun_mpi": "none", "deadline_s": {"pairs": 120, "rails": 120}}}))
    out = base / "qualify.json"
    env = {**cluster.env, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "CLUSTERDIAG_SIM_SPEC": str(base / "qualify.yaml")}
    clusterdiag = Path(sys.executable).parent / "clusterdiag"
    try:
        proc = subprocess.run(
            ["salloc", "-N4", "--time=10", str(clusterdiag), "qualify", "--tests",
             "pairs,rails", "--profile", "dgx-h100", "--drain", "--config",
             str(base / "qualify-config.yaml"), "--format", "json", "--output", str(out)],
            capture_output=True, text=True, timeout=600, env=env, check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        data = json.loads(out.read_text())
        assert data["via"] == "srun"
        assert data["bad_nodes"] == "n3", data["groups"]
        findings = {(f["check"], f["component"], f["status"])
                    for n in data["nodes"] if n["node"] == "n3" for f in n["findings"]}
        assert ("qualify.rails", "mlx5_4/1", "fail") in findings
        assert ("qualify.pairs", "node", "fail") in findings
        schedule = data["qualify"]["cross"]["schedule"]["rounds_by_test"]
        assert schedule == {"pairs": 2, "rails": 2}
        (drained,) = data["qualify"]["drained"]
        assert (drained["node"], drained["drained"]) == ("n3", True)
        state, reason = cluster.node("n3")
        assert "DRAIN" in state
        assert reason is not None
        assert reason.startswith("clusterdiag: qualify rails mlx5_4/1 ")
        assert "DRAIN" not in cluster.node("n4")[0]
    finally:
        for name in NODES:
            cluster.cmd("scontrol", "update", f"NodeName={name}", "State=RESUME")
