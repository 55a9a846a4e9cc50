"""The prolog's NVML probe loads what pynvml loads and, where that fails, says what the
runner would have said after importing pynvml and collecting."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import time
from pathlib import Path

import pynvml
import pytest

from clusterdiag.agent.collectors.nvml import collect
from clusterdiag.agent.collectors.nvml_read import error_name
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.serde import to_jsonable
from clusterdiag.agent.read import nvml_library
from clusterdiag.agent.read.sources import SourceEnv
from clusterdiag.agent.run.runner import RunOptions, run_node
from clusterdiag.agent.settings.config import Config
from clusterdiag.agent.slurm.entry import Inputs, Run
from clusterdiag.agent.slurm.job import JobEnv
from clusterdiag.agent.slurm.log import Log
from clusterdiag.agent.slurm.prolog import AgentReport, rerun_findings


def test_the_probe_loads_the_library_pynvml_loads() -> None:
    assert f'CDLL("{nvml_library.LIBRARY}")' in inspect.getsource(pynvml._LoadNvmlLibrary)


def test_the_names_are_pynvmls() -> None:
    error = pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    assert error_name(error) == nvml_library.NOT_FOUND
    assert str(error) == nvml_library.NOT_FOUND_MESSAGE


def test_without_the_library_the_collector_says_what_its_worker_would(
        monkeypatch: pytest.MonkeyPatch) -> None:
    if not nvml_library.missing():
        pytest.skip("NVML's library loads here: the worker asks it")
    env = SourceEnv(node="n1")
    said = collect(env, SourceStats(), time.monotonic() + 30)
    monkeypatch.setattr(nvml_library, "missing", lambda: False)  # ask pynvml in a worker
    stats = SourceStats()
    asked = collect(env, stats, time.monotonic() + 30)
    assert to_jsonable(said) == to_jsonable(asked)
    assert said.library_error == nvml_library.NOT_FOUND
    assert stats.calls == 1


def test_out_of_descriptors_is_not_a_missing_library() -> None:
    """dlopen cannot open even an absent library's directory entries without descriptors:
    that must not read as "no driver" (the collection names EMFILE instead)."""
    code = ("import os, resource, sys; from clusterdiag.agent.read import nvml_library; "
            "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64)); held = []\n"
            "try:\n    while True: held.append(os.open(os.devnull, os.O_RDONLY))\n"
            "except OSError: pass\n"
            "print(nvml_library.missing())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.strip() == "False"


def test_the_probe_agrees_with_nvml_init() -> None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        assert nvml_library.missing()
        return
    except pynvml.NVMLError:
        pass  # the library loaded; the driver said something else
    assert not nvml_library.missing()


def test_without_the_library_the_prolog_says_what_a_collection_would(tmp_path: Path) -> None:
    if not nvml_library.missing():
        pytest.skip("NVML's library loads here: the prolog collects as always")
    config = Config()
    collected = run_node(SourceEnv(node="n1", root=tmp_path), config,
                         RunOptions(patterns=("gpu.processes",), mode="prolog",
                                    profile="dgx-h100")).findings
    run = Run("prolog", config, None, JobEnv(None, None, None, None, None), Log("prolog"),
              time.monotonic() + 8, Inputs(root=str(tmp_path)), node="n1")
    report = AgentReport("n1", {"name": "dgx-h100"}, "2026-01-01T00:00:00+00:00", 1.0,
                         "quick", [])
    said = rerun_findings(run, report, {"gpu.processes"})
    assert said == collected
    assert json.dumps([f.to_dict() for f in said])  # a finding like any other
