"""Gathering over real transports: HTTP from agents (a real aiohttp server on loopback),
ClusterShell's exec worker running the real command per node, and srun's labelled
output. Every node asked ends as a summary or as a reason, never as a crash."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from clusterdiag.agent.base.errors import ClusterdiagError
from clusterdiag.agent.base.tokenfile import read_token
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim.node import env_for
from clusterdiag.agent.sim.spec import NodeSpec
from clusterdiag.reports.fleet.gather import (
    GatherSettings,
    gather_agent,
    gather_srun,
    gather_ssh,
    settings_from,
)
from tests.conftest import run_cli

TOKEN = "s3cret-token"
# A "slow" agent answers after SLOW_S; the gather's read timeout in the test that gives up
# on it is READ_TIMEOUT_S, long enough for the quick agents (50 ms) on a loaded machine.
SLOW_S, READ_TIMEOUT_S = 15.0, 5.0


@pytest.fixture(scope="module")
def node_report() -> dict[str, Any]:
    env = env_for(NodeSpec("n0", "dgx-h100"))
    return run_node(env, Config(), RunOptions(profile="dgx-h100")).to_dict()


class Agents:
    """One loopback server answering /<name>/v1/report the way <name> says."""

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        self.token = TOKEN
        self.calls: dict[str, int] = {}
        self.in_flight = self.max_in_flight = 0
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self.closing = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        self.calls[name] = self.calls.get(name, 0) + 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.05)
            if request.headers.get("Authorization") != f"Bearer {self.token}":
                return web.Response(status=401)
            kind = name.split("-")[0]
            if kind == "slow":  # until SLOW_S, or the server closes
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self.closing.wait(), SLOW_S)
            if kind == "flaky" and self.calls[name] == 1:
                return web.Response(status=503)
            if kind == "garbage":
                return web.Response(text="<html>502 Bad Gateway</html>")
            body = dict(self.report, node=name)
            if kind == "v2":
                body["schema"] = "clusterdiag/node-report/v2"
            if kind == "impostor":
                body["node"] = "someone-else"
            return web.json_response(body)
        finally:
            self.in_flight -= 1

    def __enter__(self) -> Agents:
        app = web.Application()
        app.router.add_get("/{name}/v1/report", self.handle)
        runner = web.AppRunner(app)
        started = threading.Event()

        async def start() -> None:
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
            started.set()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.run_until_complete(start())
            self.loop.run_forever()
            self.loop.run_until_complete(runner.cleanup())

        self.thread = threading.Thread(target=main, daemon=True)
        self.thread.start()
        assert started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.closing.set)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{name}"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def agents(node_report: dict[str, Any]) -> Iterator[Agents]:
    with Agents(node_report) as server:
        yield server


def test_agent_gather_sends_the_token_the_agent_reads(agents: Agents, tmp_path: Path) -> None:
    """A token file with a second line (a comment, a rotated token) must send only the
    first line, as the agent compares only that; the whole text makes every node a 401."""
    agents.token = "0123456789abcdef-first-line"
    path = tmp_path / "token"
    path.write_text(f"{agents.token}\n# rotated 2024-05-01, old token below\nold-token\n")
    path.chmod(0o600)
    settings = settings_from({"token_file": str(path)})
    assert settings.token == read_token(str(path)) == agents.token
    summaries, failures = gather_agent({"ok-1": agents.url("ok-1")}, settings)
    assert [s.node for s in summaries] == ["ok-1"]
    assert failures == []


def test_gather_refuses_a_token_file_the_agent_would_refuse(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("0123456789abcdef-token\n")
    path.chmod(0o644)
    with pytest.raises(ClusterdiagError, match=r"^cluster.token_file .*readable by every user"):
        settings_from({"token_file": str(path)})
    with pytest.raises(ClusterdiagError, match=r"^agent.token_file .*readable by every user"):
        settings_from({}, str(path))


def test_agent_gather_every_node_ends_as_summary_or_reason(agents: Agents) -> None:
    names = ["ok-1", "ok-2", "garbage-1", "v2-1", "flaky-1", "impostor-1"]
    urls = {n: agents.url(n) for n in names}
    urls["dead-1"] = f"http://127.0.0.1:{_closed_port()}"
    settings = GatherSettings(token=TOKEN, read_timeout_s=30, retries=1)  # none hangs
    ticks: list[int] = []
    summaries, failures = gather_agent(urls, settings, lambda: ticks.append(1))
    assert sorted(s.node for s in summaries) == ["flaky-1", "ok-1", "ok-2"]
    reasons = {f.node: f.reason for f in failures}
    assert reasons == {
        "garbage-1": "answer is not JSON",
        "v2-1": "node report schema clusterdiag/node-report/v2 is not one this clusterdiag "
                "reads (clusterdiag/node-report/v1)",
        "impostor-1": "answered with another node's report",
        "dead-1": "no answer (connect: connection refused)",
    }
    assert agents.calls["flaky-1"] == 2  # one retry after the 503
    assert agents.calls["garbage-1"] == 1  # garbage is not retried
    assert len(ticks) == len(urls)


def test_agent_gather_token_and_timeouts(agents: Agents) -> None:
    urls = {"ok-1": agents.url("ok-1"), "slow-1": agents.url("slow-1")}
    _, failures = gather_agent(urls, GatherSettings(token="wrong", retries=0))
    assert {f.reason for f in failures} == {"agent refused our token (HTTP 401)"}
    _, failures = gather_agent(urls, GatherSettings(token=TOKEN, read_timeout_s=READ_TIMEOUT_S,
                                                    retries=0))
    assert [(f.node, f.reason) for f in failures] == [
        ("slow-1", f"no complete answer within {READ_TIMEOUT_S:g} s")]


def test_agent_gather_bounds_concurrency(agents: Agents) -> None:
    urls = {f"ok-{i}": agents.url(f"ok-{i}") for i in range(12)}
    summaries, _ = gather_agent(urls, GatherSettings(token=TOKEN, concurrency=3))
    assert len(summaries) == 12
    assert agents.max_in_flight <= 3


@pytest.fixture(scope="module")
def spec_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spec") / "spec.yaml"
    path.write_text(textwrap.dedent("""\
        nodes:
          - names: n[1-3]
            profile: dgx-h100
        faults:
          - {node: n2, kind: nvlink_down, gpu: 3, link: 7}
        """))
    return path


def _exec_command(spec: Path) -> str:
    return (f"{sys.executable} -m clusterdiag.agent run --simulate {spec} --node %h "
            "--profile dgx-h100 --format json")


def test_ssh_gather_through_clustershell_exec_worker(spec_file: Path) -> None:
    settings = GatherSettings(remote_command=_exec_command(spec_file), ssh_worker="exec",
                              read_timeout_s=60)
    summaries, failures = gather_ssh(["n1", "n2", "n3", "n9"], settings)
    assert sorted(s.node for s in summaries) == ["n1", "n2", "n3"]
    assert {s.node: s.ready for s in summaries} == {"n1": True, "n2": False, "n3": True}
    assert [f.node for f in failures] == ["n9"]
    assert failures[0].reason.startswith("remote command gave no report (clusterdiag: --node n9")


def test_run_nodes_via_ssh_cli(spec_file: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"cluster": {"ssh_worker": "exec",
                                              "remote_command": _exec_command(spec_file)}}))
    exclude = tmp_path / "exclude"
    proc = run_cli("run", "--nodes", "n[1-3]", "--via", "ssh", "--config", str(config),
                   "--exclude-file", str(exclude), timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[0] == "NOT READY: 2 of 3 nodes ready, 16 of 24 GPUs"
    assert exclude.read_text() == "n2\n"
    proc = run_cli("run", "--nodes", "-", "--via", "ssh", "--config", str(config),
                   "--format", "json", "--need", "2", stdin="n1\nn[2-3]\n", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["ready"] is True


def test_srun_labelled_output_is_told_apart_by_node(tmp_path: Path,
                                                     node_report: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    canned = tmp_path / "report.json"
    canned.write_text(json.dumps(node_report, indent=1))
    srun = tmp_path / "srun"
    # A stand-in for srun: tasks print interleaved, labelled lines; node c's task dies.
    srun.write_text(textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys
        from ClusterShell.NodeSet import NodeSet
        nodes = list(NodeSet([a for a in sys.argv if a.startswith("--nodelist=")][0][11:]))
        lines = {{}}
        for rank, node in enumerate(reversed(nodes)):
            if node == "c":
                continue
            body = json.dumps(dict(json.load(open({str(canned)!r})), node=node), indent=1)
            lines[rank] = [node, *body.splitlines()]
        for i in range(max(len(v) for v in lines.values())):
            for rank, rows in lines.items():
                if i < len(rows):
                    print(f"{{rank}}: {{rows[i]}}")
        print("srun: error: c: task 2: Exited with exit code 1", file=sys.stderr)
        sys.exit(1)
        """))
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    summaries, failures = gather_srun(["a", "b", "c"], GatherSettings())
    assert sorted(s.node for s in summaries) == ["a", "b"]
    assert [(f.node, f.reason) for f in failures] == [
        ("c", "no report from its srun task (srun: error: c: task 2: Exited with exit code 1)")]
