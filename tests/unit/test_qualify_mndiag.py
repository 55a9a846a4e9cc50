"""DCGM's multi-node diagnostic in ``qualify --tests rack``: its JSON read as dcgmi/MnDiag.cpp
writes it, its prerequisites checked before it runs (a missing one a note with the reason,
never a tray's failure), and the GPU it fails named on its tray."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clusterdiag.agent.qualify import mndiag
from clusterdiag.agent.qualify.command import Request, run
from clusterdiag.agent.qualify.parsers.mndiag import parse
from clusterdiag.agent.read.sources import CommandResult
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.sim import mndiag as sim_mndiag
from clusterdiag.agent.sim.dcgmi import styled
from clusterdiag.agent.sim.faults.qualify import MNUBERGEMM_ERROR
from clusterdiag.agent.sim.node import build
from clusterdiag.agent.sim.spec import load_spec
from clusterdiag.agent.sim.tools import SimTools
from clusterdiag.checks.core.finding import Status

RACK = [{"names": "t[01-04]", "profile": "gb200-nvl72", "rack": "r1"}]


def _sim(tmp_path: Path, faults: list[dict[str, Any]] | None = None,
         profile: str = "gb200-nvl72") -> SimTools:
    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps({"nodes": [{**RACK[0], "profile": profile}],
                                "faults": faults or []}))
    nodes = {n: build(s) for n, s in load_spec(str(spec)).nodes.items()}
    return SimTools(nodes)


def _trays(tools: SimTools) -> list[str]:
    return sorted(tools.nodes)


def test_the_document_names_the_failing_gpu_by_host_name(tmp_path: Path) -> None:
    tools = _sim(tmp_path, [{"node": "t03", "kind": "mndiag_gpu_error", "gpu": 2}])
    printed = tools("t01", mndiag.command("dcgmi", _trays(tools)), {}, 60)
    assert printed.returncode == 0
    result = parse(printed.stdout)
    assert result is not None
    assert result.status == "Fail"
    assert not result.errors
    assert [(r.host, r.gpu, r.messages) for r in result.failed] == [
        ("t03", 2, [MNUBERGEMM_ERROR])]
    assert len(result.results) == 16
    found = mndiag.findings(result, _trays(tools))
    assert [(f.status, f.component, f.action.value) for f in found["t03"]] == [
        (Status.FAIL, "gpu2", "drain")]
    assert {t for t, own in found.items() if own[0].status is Status.PASS} == {
        "t01", "t02", "t04"}


# ``dcgmi mndiag --run mnubergemm --hostList 'ta;tb' --json`` written by hand from
# dcgmi/MnDiag.cpp (NVIDIA/DCGM @ 72fa3fe), not from the simulator: the name under NVVS_NAME
# (:491; "DCGM Diagnostic", nvvs/include/NvvsJsonStrings.h:34), metadata (:494-495), hosts and
# their entities (:506-541), the test (:553-559) and its results with their warnings
# (:598-626); no mpi_error nor global_errors, the test having a GPU error (:562, :675). Laid out
# as jsoncpp's toStyledString does (:470): three spaces, " : ", keys in std::map order.
MNDIAG_CPP = """{
   "DCGM Diagnostic" : "DCGM Multi-Node Diagnostic",
   "hosts" : [
      {
         "dcgm_version" : "4.4.1",
         "driver_version" : "570.133.20",
         "entities" : [
            {
               "entity_group" : "GPU",
               "entity_group_id" : 1,
               "entity_id" : 0
            },
            {
               "entity_group" : "GPU",
               "entity_group_id" : 1,
               "entity_id" : 1
            }
         ],
         "host_id" : 0,
         "hostname" : "ta",
         "num_entities" : 2
      },
      {
         "dcgm_version" : "4.4.1",
         "driver_version" : "570.133.20",
         "entities" : [
            {
               "entity_group" : "GPU",
               "entity_group_id" : 1,
               "entity_id" : 0
            },
            {
               "entity_group" : "GPU",
               "entity_group_id" : 1,
               "entity_id" : 1
            }
         ],
         "host_id" : 1,
         "hostname" : "tb",
         "num_entities" : 2
      }
   ],
   "metadata" : {
      "num_entities" : 4,
      "num_hosts" : 2
   },
   "test_categories" : [
      {
         "category" : "Multi-Node Tests",
         "tests" : [
            {
               "name" : "MNUBERGEMM",
               "results" : [
                  {
                     "entity_group" : "GPU",
                     "entity_group_id" : 1,
                     "entity_id" : 0,
                     "host_id" : 0,
                     "status" : "Pass"
                  },
                  {
                     "entity_group" : "GPU",
                     "entity_group_id" : 1,
                     "entity_id" : 1,
                     "host_id" : 0,
                     "status" : "Pass"
                  },
                  {
                     "entity_group" : "GPU",
                     "entity_group_id" : 1,
                     "entity_id" : 0,
                     "host_id" : 1,
                     "status" : "Pass"
                  },
                  {
                     "entity_group" : "GPU",
                     "entity_group_id" : 1,
                     "entity_id" : 1,
                     "host_id" : 1,
                     "status" : "Fail",
                     "warnings" : [
                        {
                           "error_category" : 15,
                           "error_id" : 1,
                           "error_severity" : 4,
                           "warning" : "GPU 1: checksum mismatch"
                        }
                     ]
                  }
               ],
               "status" : "Fail",
               "test_summary" : {
                  "status" : "Fail"
               }
            }
         ]
      }
   ]
}
"""


def test_the_document_as_mndiag_cpp_builds_it() -> None:
    result = parse(MNDIAG_CPP)
    assert result is not None
    assert (result.status, result.errors) == ("Fail", [])
    assert [(r.host, r.gpu, r.messages) for r in result.failed] == [
        ("tb", 1, ["GPU 1: checksum mismatch"])]
    found = mndiag.findings(result, ["ta", "tb"])
    assert [(f.status, f.component) for f in found["tb"]] == [(Status.FAIL, "gpu1")]
    assert [(f.status, f.component) for f in found["ta"]] == [(Status.PASS, "node")]
    # The name alone under its own key (as dcgm_mndiag_schema.json has it) is not what
    # dcgmi prints, nor is ``dcgmi diag``'s document under the same key.
    assert parse(MNDIAG_CPP.replace('"DCGM Diagnostic" :', '"DCGM Multi-Node Diagnostic" :')
                 ) is None


def test_an_mpi_error_is_no_gpu_failure() -> None:
    """MnDiag.cpp:560-575 and :676-682: a failed test with no GPU error carries the MPI
    error twice (the test's ``mpi_error`` and ``global_errors``); nothing is a GPU's fault."""
    document = {"DCGM Diagnostic": "DCGM Multi-Node Diagnostic",
                "metadata": {"num_hosts": 2, "num_entities": 0},
                "test_categories": [{"category": "Multi-Node Tests", "tests": [{
                    "name": "MNUBERGEMM", "status": "Fail", "test_summary": {"status": "Fail"},
                    "mpi_error": {"warning": "Error: mpirun exited 1",
                                  "error_category": "MPI"}}]}],
                "global_errors": [{"warning": "Error: mpirun exited 1",
                                   "error_category": "MPI"}]}
    result = parse(styled(document))
    assert result is not None
    assert result.errors == ["Error: mpirun exited 1"]
    assert not result.failed
    assert mndiag.findings(result, ["a", "b"]) == {}


def test_a_runtime_error_document_and_garbage() -> None:
    result = parse('{"DCGM Diagnostic": "DCGM Multi-Node Diagnostic", '
                   '"runtime_error": "Unable to connect to host t07:5555"}')
    assert result is not None
    assert result.errors == ["Unable to connect to host t07:5555"]
    assert parse("Error: unable to establish a connection to the specified host") is None
    assert parse('{"DCGM Diagnostic": {}}') is None
    hostile = {"DCGM Diagnostic": "DCGM Multi-Node Diagnostic",
               "hosts": [{"host_id": 0, "hostname": 7}],
               "test_categories": [{"tests": [{"results": [
                   {"host_id": 0, "entity_group_id": 1, "entity_id": "0", "status": "Fail"},
                   {"host_id": 0, "entity_group_id": 1, "entity_id": 10**40, "status": "Fail"},
                   {"host_id": 5, "entity_group_id": 1, "entity_id": 1, "status": "Fail"},
                   {"host_id": 0, "entity_group_id": 1, "entity_id": 1, "status": "Fail",
                    "warnings": [{"warning": "x" * 10_000}]}]}]}]}
    read = parse(json.dumps(hostile))
    assert read is not None
    assert [(r.host, r.gpu, len(r.messages[0])) for r in read.failed] == [("7", 1, 300)]


def _judged(results: list[tuple[int, int, int, str]], gpus: int = 4) -> Any:
    """Findings on trays t1..t3 from a document in MnDiag.cpp's shape (HelperJsonAddHosts,
    :506-541, each host listing ``gpus`` GPUs; HelperJsonAddResults, :598-602): each result
    is (host_id, entity_group_id, entity_id, status)."""
    hosts = [{"host_id": h, "hostname": f"t{h + 1}", "entities": [
        {"entity_group_id": 1, "entity_group": "GPU", "entity_id": g} for g in range(gpus)]}
        for h in range(3)]
    rows = [{"host_id": h, "entity_group_id": group, "entity_id": index, "status": status,
             **({"warnings": [{"warning": "slow"}]} if status == "Warn" else {})}
            for h, group, index, status in results]
    document = {"DCGM Diagnostic": "DCGM Multi-Node Diagnostic", "hosts": hosts,
                "test_categories": [{"category": "Multi-Node Tests", "tests": [
                    {"name": "MNUBERGEMM", "status": "Warn", "results": rows}]}]}
    result = parse(styled(document))
    assert result is not None
    return {t: [(f.status, f.component, f.observed, f.action.value) for f in own]
            for t, own in mndiag.findings(result, ["t1", "t2", "t3"]).items()}


def test_a_tray_passes_only_when_every_gpu_passed() -> None:
    """One Pass is no pass of the tray: a Warn is a warn, a Skip, a Not Run or a GPU its
    host listed with no result leaves the tray unjudged (a skip, never a drain)."""
    found = _judged([(0, 1, 0, "Pass"), (0, 1, 1, "Not Run"), (0, 1, 2, "Warn"),
                     (0, 1, 3, "Pass"),
                     *[(1, 1, g, "Pass") for g in range(4)],
                     (2, 1, 0, "Pass"), (2, 1, 1, "Skip")])
    assert found["t1"] == [(Status.WARN, "gpu2", "slow", "investigate"),
                           (Status.SKIP, "node", "gpu1 Not Run", "none")]
    assert found["t2"] == [(Status.PASS, "node", "gpu0, gpu1, gpu2, gpu3", "none")]
    assert found["t3"] == [(Status.SKIP, "node",
                            "gpu1 Skip, gpu2 no result, gpu3 no result", "none")]


def test_a_result_for_no_gpu_is_never_a_gpu_finding() -> None:
    """entity_group_id 1 is DCGM_FE_GPU (dcgmlib/dcgm_fields.h:264); 3 is DCGM_FE_SWITCH
    (:266): a switch's Fail is not ``gpu5`` of the tray, nor a drain."""
    found = _judged([(0, 3, 5, "Fail"), (0, 1, 0, "Pass"), (1, 0, 0, "Fail")], gpus=1)
    assert found == {"t1": [(Status.PASS, "node", "gpu0", "none")],
                     "t2": [(Status.SKIP, "node", "gpu0 no result", "none")],
                     "t3": [(Status.SKIP, "node", "gpu0 no result", "none")]}


def test_the_version_line_and_its_minimum() -> None:
    assert mndiag.dcgm_version(sim_mndiag.version().stdout) == (4, 4)
    assert mndiag.dcgm_version("dcgmi  version: 4.2.3") == (4, 2)
    assert mndiag.dcgm_version("no such thing") is None
    assert mndiag.minimum_version("gb300-nvl72") == (4, 4)
    assert mndiag.minimum_version("gb200-nvl72") == (4, 3)


class _Answers:
    """A runner answering each probe as ``answer`` says, else as the simulator does."""

    def __init__(self, tools: SimTools, answer: Mapping[str, CommandResult]) -> None:
        self.tools, self.answer = tools, answer

    def __call__(self, node: str, argv: list[str], env: Mapping[str, str],
                 timeout_s: float) -> CommandResult:
        for key, result in self.answer.items():
            if key in " ".join([node, *argv]):
                return result
        return self.tools(node, argv, env, timeout_s)


def test_every_prerequisite_met_on_a_healthy_simulated_rack(tmp_path: Path) -> None:
    tools = _sim(tmp_path)
    assert mndiag.prerequisites("t01", _trays(tools), "dcgmi", "gb200-nvl72", tools) is None


def test_each_missing_prerequisite_is_the_reason_to_skip(tmp_path: Path) -> None:
    tools = _sim(tmp_path)
    trays = _trays(tools)
    refused = CommandResult([], 255, "", "Permission denied (publickey).\n")
    cases = {
        "dcgmi --version": (CommandResult([], None, error="dcgmi: not found"), "not found"),
        "--version": (CommandResult([], 0, "\ndcgmi  version: 4.2.3\n\n"), "DCGM 4.2 on t01"),
        "which mpirun": (CommandResult([], 1, ""), "no mpirun"),
        "t03 true": (refused, "ssh (BatchMode) from t01 fails to t03: Permission denied"),
        "bash t02 5555": (CommandResult([], 1, "", "bash: connect: Connection refused\n"),
                          "port 5555 from t01 fails to t02"),
        "t04 nvidia-smi": (CommandResult([], 0, "81234\n"), "GPUs in use (compute processes) "
                                                           "on t04: 81234"),
    }
    for key, (answer, said) in cases.items():
        why = mndiag.prerequisites("t01", trays, "dcgmi", "gb200-nvl72",
                                   _Answers(tools, {key: answer}))
        assert said in str(why), (key, why)
    gb300 = _sim(tmp_path, profile="gb300-nvl72")
    older = {"--version": CommandResult([], 0, "\ndcgmi  version: 4.3.2\n\n")}
    why = mndiag.prerequisites("t01", _trays(gb300), "dcgmi", "gb300-nvl72",
                               _Answers(gb300, older))
    assert "needs 4.4 or later" in str(why)
    many = [f"n{i}" for i in range(73)]
    assert "over dcgmi mndiag's 72 hosts" in str(
        mndiag.prerequisites("n0", many, "dcgmi", "gb200-nvl72", tools))


def _qualify(tmp_path: Path, faults: list[dict[str, Any]]) -> Any:
    spec = tmp_path / "q.yaml"
    spec.write_text(json.dumps({"nodes": RACK, "faults": faults}))
    return run(Request(simulate=str(spec), tests="rack"), Config())


def test_qualify_rack_names_the_gpu_mndiag_fails(tmp_path: Path) -> None:
    report = _qualify(tmp_path, [{"node": "t02", "kind": "mndiag_gpu_error", "gpu": 1}])
    bad = sorted((n, f.check, f.component, f.status) for n, own in report.findings.items()
                 for f in own if f.status not in (Status.PASS, Status.SKIP))
    assert bad == [("t02", "qualify.rack", "gpu1", Status.FAIL)]
    assert report.bad_nodes == ["t02"]


def test_a_healthy_rack_passes_mndiag_on_every_tray(tmp_path: Path) -> None:
    report = _qualify(tmp_path, [])
    said = {n: [f.message for f in own if "mndiag" in f.message]
            for n, own in report.findings.items()}
    assert all(m == ["dcgmi mndiag (mnubergemm) passed every GPU"] for m in said.values()), said
    assert not report.bad_nodes
