"""IMEX state on a tray (agent/collectors/imex.py) and the simulated nvidia-imex-ctl
(agent/sim/writers/imex.py), held to a published 570.172 listing of an 18-tray domain
(UNATTRIBUTED, possibly hand-edited: shared/data/real/gb200/SOURCES.md) and to IMEX
570.00's real output of a one- and a two-node GH200 domain."""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from clusterdiag.agent.collectors import host, imex
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.host import ImexState
from clusterdiag.agent.read.sources import CommandResult, SourceEnv
from clusterdiag.agent.read.sysfs import FileCounter
from clusterdiag.agent.sim.node import build, env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.agent.sim.state.hardware import SimNode
from clusterdiag.agent.sim.writers.imex import domain_hosts, imex_ctl
from tests.real import real_file

CAPTURE = "imex-ctl-N__p6e-gb200-18node-UP__UNATTRIBUTED-aws-doc.txt"
MARKER = "# ---- capture below (verbatim) ----\n"
UNIT = "nvidia-imex.service"
PARAMS = {"fabric.imex": {"unit": UNIT}}


def real_capture() -> str:
    return real_file("gb200", "gb200", CAPTURE).read_text().split(MARKER, 1)[1]


def tray(*faults: dict[str, object]) -> SimNode:
    return build(NodeSpec("nvl1-tray01", "gb200-nvl72", rack="nvl1",
                          faults=[{"node": "nvl1-tray01", **f} for f in faults]))


def test_the_real_570_text_parses_to_an_up_domain_of_eighteen_ready_trays() -> None:
    domain = imex.parse_domain(real_capture())
    assert (domain.status, domain.form, len(domain.nodes)) == ("UP", "text", 18)
    assert {n.status for n in domain.nodes} == {"READY"}
    assert {n.version for n in domain.nodes} == {"570.172"}
    assert (domain.nodes[0].host, domain.nodes[17].host) == ("172.31.48.81", "172.31.56.47")


GH200 = "imex-ctl-status-and-daemon-log__GH200-MNNVL-1node-2node__jpsnips-nv.txt"


def test_the_real_570_00_text_without_versions_names_every_node() -> None:
    """IMEX 570.00 prints no version part; both of the capture's listings are read whole."""
    text = real_file("gb200", "gb200", GH200).read_text()
    listings = re.findall(r"^Nodes:\n(?:.*\n)*?Domain State: \w+$", text, re.MULTILINE)
    domains = [imex.parse_domain(listing) for listing in listings]
    assert [[(n.index, n.host, n.status, n.version) for n in d.nodes] for d in domains] == [
        [(0, "10.136.206.48", "READY", None)],
        [(0, "10.136.206.47", "READY", None), (1, "10.136.206.48", "READY", None)]]
    assert {d.status for d in domains} == {"UP"}


def test_a_node_line_without_a_version_is_read_and_an_unknown_one_refused() -> None:
    """The line as IMEX 570.00 prints it (jgehrcke/jpsnips-nv @ 2d4acc3,
    repros/imex-1node-fabric-hdl-import101/README.md, MIT, (c) 2025 Jan-Philip Gehrcke);
    a node line of no known form refuses the output rather than leave the node out."""
    domain = imex.parse_domain("Nodes:\nNode #0   - 10.136.206.48   - READY\n"
                               "Node #1   - 10.136.206.49   - UNAVAILABLE\n"
                               "Domain State: DOWN\n")
    assert [(n.host, n.status) for n in domain.nodes] == [("10.136.206.48", "READY"),
                                                          ("10.136.206.49", "UNAVAILABLE")]
    for line in ("Node #1 - 10.136.206.49", "Node #1 - 10.0.0.2 - READY - Build: 7"):
        with pytest.raises(imex.ImexOutputError, match="node line"):
            imex.parse_domain(f"{line}\nDomain State: DOWN\n")


def test_the_stand_in_prints_the_real_text_line_by_line() -> None:
    """Every line as the capture has it; the addresses, the timestamp and the version are
    the simulated tray's, in the same columns."""
    real = real_capture().splitlines()
    node = tray()
    printed = imex_ctl(node, ["nvidia-imex-ctl", "-N"]).stdout.splitlines()
    assert len(printed) == len(real)
    stamp = re.compile(r"\d{1,2}/\d{1,2}/\d{4} \d\d:\d\d:\d\d\.\d{3}")
    for ours, theirs in zip(printed, real, strict=True):
        if theirs.startswith("Node #"):
            assert [m.start() for m in re.finditer(" - ", ours)] == [
                m.start() for m in re.finditer(" - ", theirs)], (ours, theirs)
            assert ours.split(" - ")[0] == theirs.split(" - ")[0]
            assert ours.split(" - ")[2] == theirs.split(" - ")[2]
        elif stamp.fullmatch(theirs):
            assert stamp.fullmatch(ours), ours
        else:
            assert ours == theirs


def test_the_stand_in_json_and_text_agree_and_name_the_missing_tray() -> None:
    node = tray({"kind": "imex_domain_degraded", "peer": 5})
    forms = [imex.parse_domain(imex_ctl(node, ["nvidia-imex-ctl", *args]).stdout)
             for args in (["-N"], ["-N", "-j"])]
    for domain in forms:
        assert domain.status == "DEGRADED"
        assert [(n.index, n.host) for n in domain.nodes if n.status != "READY"] == [
            (5, domain_hosts(node)[5])]
    assert [f.form for f in forms] == ["text", "json"]


def test_json_as_nvidia_documents_it_from_a_live_580_domain() -> None:
    """The shape NVIDIA/ai-cloud-validation's imex_domain_test.py shows (a down peer
    UNAVAILABLE, its connections INVALID), with -H's hostName."""
    output = json.dumps({"nodes": {
        "0": {"status": "READY", "host": "10.0.0.1", "hostName": "gpu-node-1",
              "connections": {"0": {"host": "10.0.0.1", "status": "CONNECTED"}},
              "changed": True, "version": "580.95.05"},
        "1": {"status": "UNAVAILABLE", "host": "10.0.0.2", "connections": {
            "0": {"host": "10.0.0.1", "status": "INVALID"}}, "changed": True}},
        "timestamp": "9/4/2026 00:37:39.905", "status": "DOWN"})
    domain = imex.parse_domain(output)
    assert domain.status == "DOWN"
    assert [(n.host, n.host_name, n.status, n.version) for n in domain.nodes] == [
        ("10.0.0.1", "gpu-node-1", "READY", "580.95.05"),
        ("10.0.0.2", None, "UNAVAILABLE", None)]


@pytest.mark.parametrize("output", [
    "",  # nothing at all
    "garbage\n",
    '{"status": "UP"}',  # no nodes
    '{"status": "SIDEWAYS", "nodes": {}}',
    '{"status": "UP", "nodes": {"0": {"status": "READY", "host": "<script>x</script>"}}}',
    '{"status": "UP", "nodes": {"0": {"status": "READY\\u001b[2J", "host": "10.0.0.1"}}}',
    '{"status": "UP", "nodes": {"x": {"status": "READY", "host": "10.0.0.1"}}}',
    '{"status": "UP", "nodes": {"0": {"status": "READY", "host": "10.0.0.1", '
    '"hostName": "a b"}}}',
    '{"status": "UP", "nodes": [1]}',
    "[" * 100_000,  # nesting deep enough to exhaust the JSON parser's recursion
    "Domain State: UP\n" + "x" * imex.MAX_OUTPUT_CHARS,
    json.dumps({"status": "UP", "nodes": {str(i): {"status": "READY", "host": "10.0.0.1"}
                                          for i in range(imex.MAX_NODES + 1)}}),
])
def test_hostile_output_is_refused_with_a_reason_never_kept(output: str) -> None:
    with pytest.raises(imex.ImexOutputError):
        imex.parse_domain(output)


def test_nodes_file_is_one_address_or_name_per_line() -> None:
    assert imex.parse_nodes_config("10.0.0.1\n\n# rack 1\ntray02.example  # x\n") == [
        "10.0.0.1", "tray02.example"]
    for bad in ("", "# only a comment\n", "10.0.0.1 10.0.0.2\n", "10.0.0.1;rm -rf /\n"):
        with pytest.raises(imex.ImexOutputError):
            imex.parse_nodes_config(bad)


class Recorder:
    def __init__(self, answer: CommandResult) -> None:
        self.answer = answer
        self.calls: list[tuple[list[str], float]] = []

    def __call__(self, argv: list[str], timeout_s: float) -> CommandResult:
        self.calls.append((argv, timeout_s))
        if argv[0] == "systemctl":
            return CommandResult(argv, 0, f"Id={UNIT}\nActiveState=active\nSubState=running\n"
                                          "LoadState=loaded\n")
        return self.answer


def _tree(root: Path) -> Path:
    (root / "run/systemd/system").mkdir(parents=True)
    (root / "etc/nvidia-imex").mkdir(parents=True)
    (root / "etc/nvidia-imex/nodes_config.cfg").write_text("10.0.0.1\n10.0.0.2\n")
    (root / "dev/nvidia-caps-imex-channels").mkdir(parents=True)
    (root / "dev/nvidia-caps-imex-channels/channel0").write_text("")
    return root


def _collect(root: Path, runner: Recorder, budget_s: float = 60.0) -> ImexState:
    env = SourceEnv(node="n1", root=root, runner=runner, params=PARAMS)
    state = host.collect(env, SourceStats(), time.monotonic() + budget_s).imex
    assert state is not None
    return state


def test_imex_ctl_runs_without_a_shell_within_30_s_and_a_hang_is_a_reason(
        tmp_path: Path) -> None:
    runner = Recorder(CommandResult(["nvidia-imex-ctl"], None,
                                    error="nvidia-imex-ctl: no answer within 30 s"))
    state = _collect(_tree(tmp_path), runner)
    assert [c for c in runner.calls if c[0][0] == "nvidia-imex-ctl"] == [
        (["nvidia-imex-ctl", "-N", "-j"], pytest.approx(30.0, abs=0.5))]
    assert state.domain is None
    assert "no answer within 30 s" in state.unknown["domain"]
    assert state.nodes_config == ["10.0.0.1", "10.0.0.2"]
    assert state.channels == ["channel0"]


def test_imex_ctl_gets_only_what_is_left_of_the_budget(tmp_path: Path) -> None:
    runner = Recorder(CommandResult(["nvidia-imex-ctl"], 0, "Domain State: UP\n"))
    _collect(_tree(tmp_path), runner, budget_s=5.0)
    (limit,) = [t for argv, t in runner.calls if argv[0] == "nvidia-imex-ctl"]
    assert limit < 5.0


def test_a_hanging_imex_ctl_leaves_the_clock_its_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-imex-ctl that hangs for all it is given runs after the clock probe, so the
    host source's budget is not spent before the clock is read."""
    now = [1000.0]
    monkeypatch.setattr(host, "time", SimpleNamespace(monotonic=lambda: now[0]))

    def runner(argv: list[str], timeout_s: float) -> CommandResult:
        if argv[0] == "nvidia-imex-ctl":
            now[0] += timeout_s
            return CommandResult(argv, None, error="nvidia-imex-ctl: no answer")
        if argv[0] == "timedatectl":
            return CommandResult(argv, 0, "yes\n")
        return Recorder(CommandResult(argv, 0, ""))(argv, timeout_s)

    env = SourceEnv(node="n1", root=_tree(tmp_path), runner=runner, params=PARAMS)
    info = host.collect(env, SourceStats(), now[0] + 10.0)
    assert info.clock is not None
    assert (info.clock.method, info.clock.synchronized) == ("timedatectl", True)
    assert info.imex is not None
    assert "no answer" in info.imex.unknown["domain"]
    assert now[0] <= 1010.0 - host.FINISH_RESERVE_S


def test_no_command_where_imex_is_not_judged_or_not_running(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    runner = Recorder(CommandResult(["nvidia-imex-ctl"], 0, "Domain State: UP\n"))
    env = SourceEnv(node="n1", root=root, runner=runner, params={})
    assert host.collect(env, SourceStats(), time.monotonic() + 60).imex is None
    state = imex.read(lambda p: root / p.lstrip("/"), FileCounter(), runner, False)
    assert state.domain is None
    assert not [argv for argv, _ in runner.calls if argv[0] == "nvidia-imex-ctl"]


def _registration(root: Path) -> Path:
    (root / imex.DRA_PLUGIN_DIR.lstrip("/")).mkdir(parents=True)
    where = root / imex.DRA_REGISTRATION.lstrip("/")
    where.parent.mkdir(parents=True)
    return where


def _read(root: Path, simulated: bool = False) -> ImexState:
    return imex.read(lambda p: root / p.lstrip("/"), FileCounter(), Recorder(
        CommandResult(["nvidia-imex-ctl"], 0, "")), False, simulated=simulated)


def test_a_dra_plugin_is_live_only_where_its_registration_socket_accepts() -> None:
    """The folder alone outlives the driver; a socket file outlives a killed plugin (bound,
    then closed: refused); only a listening socket is a live plugin. A short temporary
    directory, since a unix socket's path is limited to 108 bytes (unix(7))."""
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        where = _registration(root)
        folder_only = _read(root)
        assert (folder_only.dra_plugin, folder_only.dra_live) == (True, False)
        assert folder_only.unknown["dra_live"] == f"{imex.DRA_REGISTRATION}: missing"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
            server.bind(str(where))
            server.listen(1)
            assert _read(root).dra_live
        stale = _read(root)  # the file stays, nothing listens
        assert not stale.dra_live
        assert "refused" in stale.unknown["dra_live"].lower()


def test_socket_refusal_names_why_and_a_simulated_file_stands_for_a_socket(
        tmp_path: Path) -> None:
    where = _registration(tmp_path)
    where.write_text("")
    assert imex.socket_refusal(where) == "not a socket"
    assert imex.socket_refusal(tmp_path / "absent.sock") == "missing"
    assert not _read(tmp_path).dra_live
    assert _read(tmp_path, simulated=True).dra_live


def test_the_simulated_dra_driver_runs_and_an_uninstalled_one_is_not_live() -> None:
    env = env_for(NodeSpec("nvl1-tray01", "gb200-nvl72", rack="nvl1",
                           faults=[{"node": "nvl1-tray01", "kind": "imex_host_under_dra"}]))
    env = dataclasses.replace(env, params=PARAMS)
    state = host.collect(env, SourceStats(), time.monotonic() + 60).imex
    assert state is not None
    assert (state.dra_plugin, state.dra_live) == (True, True)
    (env.root / imex.DRA_REGISTRATION.lstrip("/")).unlink()
    state = host.collect(env, SourceStats(), time.monotonic() + 60).imex
    assert state is not None
    assert (state.dra_plugin, state.dra_live) == (True, False)


def test_own_entries_are_the_local_addresses_and_the_host_name() -> None:
    fib = ("Local:\n  +-- 10.0.0.0/8 2 0 2\n     |-- 10.0.0.0\n        /8 host LOCAL\n"
           "     |-- 10.0.0.7\n        /32 host LOCAL\n     |-- 10.0.0.255\n"
           "        /32 link BROADCAST\n")
    inet6 = "fd000000000000000000000000000002 04 40 00 82     eth0\n"
    found = imex.local_addresses(fib, inet6)
    assert found == {"10.0.0.7", "fd00::2"}
    entries = ["10.0.0.0", "10.0.0.7", "10.0.0.255", "fd00:0::2", "tray01.rack", "tray02"]
    assert imex.own_entries(entries, found, "tray01") == ["10.0.0.7", "fd00:0::2", "tray01.rack"]


def test_local_addresses_read_this_machines_kernel_tables() -> None:
    """The real /proc/net files of the kernel running the tests: the loopback is local."""
    fib, inet6 = Path("/proc/net/fib_trie"), Path("/proc/net/if_inet6")
    if not fib.exists():
        pytest.skip("no /proc/net/fib_trie on this machine")
    found = imex.local_addresses(fib.read_text(), inet6.read_text() if inet6.exists() else "")
    assert "127.0.0.1" in found


def test_the_collector_keeps_the_entries_that_are_this_tray(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    (root / "proc/net").mkdir(parents=True)
    (root / "proc/net/fib_trie").write_text("Local:\n     |-- 10.0.0.2\n"
                                            "        /32 host LOCAL\n")
    (root / "etc/nvidia-imex/nodes_config.cfg").write_text("10.0.0.1\n10.0.0.2\nn1.rack\n")
    runner = Recorder(CommandResult(["nvidia-imex-ctl"], 0, "Domain State: UP\n"))
    assert _collect(root, runner).own == ["10.0.0.2", "n1.rack"]
