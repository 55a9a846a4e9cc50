"""``dcgmi mndiag -j``: DCGM's multi-node diagnostic (mnubergemm) as its JSON document.

The document is built by dcgmi/MnDiag.cpp (NVIDIA/DCGM @ 72fa3fe): the key
``"DCGM Diagnostic"`` (``NVVS_NAME``, nvvs/include/NvvsJsonStrings.h:34) holding the value
``"DCGM Multi-Node Diagnostic"`` (``output[NVVS_NAME] = "DCGM Multi-Node Diagnostic"``,
MnDiag.cpp:491) and ``metadata`` (HelperJsonAddMetadata, :488-496), ``hosts`` with each
``host_id``, ``hostname`` and the ``entities`` asked of it, each with its ``entity_group_id``
and ``entity_id`` (HelperJsonAddHosts, :499-543; left out when the run itself failed,
:478-482), ``test_categories[0].tests`` whose ``results`` carry ``host_id``,
``entity_group_id``, ``entity_id`` and ``status`` per entity with the ``warnings`` mnubergemm
printed for it (HelperJsonAddResults, :586-652), an ``mpi_error`` where the test failed with
no GPU error (:560-575), ``global_errors`` (:655-686) and, where the request never ran, the
name and ``runtime_error`` (HelperDisplayFailureMessage, :187-193). Key names are
nvvs/include/NvvsJsonStrings.h:20-53. testing/python3/dcgm_mndiag_schema.json names the first
key ``"DCGM Multi-Node Diagnostic"`` instead, but nothing validates against it (its one
reader, test_utils.py ``mndiag_verify_json``, is called nowhere): dcgmi's code is what prints.
No real capture of this output exists (the real GB200 captures this project was given list
it as missing).

Only GPU entities are read: ``entity_group_id`` 1 is ``DCGM_FE_GPU``
(dcgmlib/dcgm_fields.h:263-264, ``DCGM_FE_NONE = 0`` then ``DCGM_FE_GPU``); a result for any
other entity is never a GPU's. A GPU index is below ``DCGM_MAX_NUM_DEVICES``, 32
(dcgmlib/dcgm_structs.h:163); any other is no GPU of DCGM's.

A GPU result ``Fail`` is mnubergemm's own ``MNUB [E]`` line for that GPU
(modules/mndiag/MnDiagMpiMnubergemmRunner.cpp:179-265, 355-388): the GPU is named. An MPI
error, a global error or a runtime error says the run could not judge anything: that is the
test's trouble, never a GPU's failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

KEY = "DCGM Diagnostic"  # NVVS_NAME (NvvsJsonStrings.h:34)
NAME = "DCGM Multi-Node Diagnostic"  # its value in dcgmi mndiag's document (MnDiag.cpp:491)
DCGM_FE_GPU = 1
DCGM_MAX_NUM_DEVICES = 32
_MAX_TEXT = 300  # a message from the tool is shown, never more than this
_MAX_ITEMS = 72 * 4 * 4  # DCGM_MN_DIAG_RESPONSE_HOSTS_MAX hosts x GPUs x tests, with margin
_STATUSES = ("Pass", "Fail", "Warn", "Skip", "Not Run")  # the schema's enum


@dataclass
class GpuResult:
    host: str
    gpu: int
    status: str
    messages: list[str] = field(default_factory=list)


@dataclass
class MnDiag:
    """What one ``dcgmi mndiag -j`` said: each GPU's result by host name, the GPUs each
    host was asked to test (``gpus``), and what kept the run from judging (``errors``);
    ``status`` is the test's overall result."""

    status: str = ""
    hosts: dict[int, str] = field(default_factory=dict)
    gpus: dict[str, set[int]] = field(default_factory=dict)
    results: list[GpuResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[GpuResult]:
        return [r for r in self.results if r.status == "Fail"]


def _text(value: Any) -> str:
    return " ".join(str(value).split())[:_MAX_TEXT]


def _document(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text``: dcgmi may print a line before it (DCGM's own test
    harness trims to the outer braces, testing/python3/DcgmiMnDiag.py trimJsonText)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        document = json.loads(text[start:end + 1])
    except (ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) and document.get(KEY) == NAME else None


def _gpu(entry: Any) -> int | None:
    """The GPU index of a host's entity or a result, or None where it is no GPU."""
    if not isinstance(entry, dict) or entry.get("entity_group_id") != DCGM_FE_GPU:
        return None
    index = entry.get("entity_id")
    if isinstance(index, bool) or not isinstance(index, int):
        return None
    return index if 0 <= index < DCGM_MAX_NUM_DEVICES else None


def _warnings(entry: dict[str, Any]) -> list[str]:
    items = entry.get("warnings")
    if not isinstance(items, list):
        return []
    return [_text(w.get("warning", "")) for w in items[:_MAX_ITEMS] if isinstance(w, dict)]


def parse(text: str) -> MnDiag | None:
    """The run's results, or None where ``text`` holds no multi-node diagnostic document."""
    document = _document(text)
    if document is None:
        return None
    out = MnDiag()
    if "runtime_error" in document:
        out.errors.append(_text(document["runtime_error"]))
    hosts = document.get("hosts")
    for host in hosts[:_MAX_ITEMS] if isinstance(hosts, list) else []:
        if isinstance(host, dict) and isinstance(host.get("host_id"), int):
            name = out.hosts[host["host_id"]] = _text(host.get("hostname", ""))
            entities = host.get("entities")
            asked = [_gpu(e) for e in entities[:_MAX_ITEMS]] if isinstance(entities, list) else []
            out.gpus.setdefault(name, set()).update(g for g in asked if g is not None)
    categories = document.get("test_categories")
    for category in categories[:_MAX_ITEMS] if isinstance(categories, list) else []:
        tests = category.get("tests") if isinstance(category, dict) else None
        for test in tests[:_MAX_ITEMS] if isinstance(tests, list) else []:
            if not isinstance(test, dict):
                continue
            if test.get("status") in _STATUSES:
                out.status = str(test["status"])
            mpi = test.get("mpi_error")
            if isinstance(mpi, dict):
                out.errors.append(_text(mpi.get("warning", "")))
            results = test.get("results")
            for entry in results[:_MAX_ITEMS] if isinstance(results, list) else []:
                if not isinstance(entry, dict) or entry.get("status") not in _STATUSES:
                    continue
                host, gpu = entry.get("host_id"), _gpu(entry)
                if isinstance(host, int) and gpu is not None and host in out.hosts:
                    out.results.append(GpuResult(out.hosts[host], gpu, entry["status"],
                                                 _warnings(entry)))
    errors = document.get("global_errors")
    for error in errors[:_MAX_ITEMS] if isinstance(errors, list) else []:
        if isinstance(error, dict):
            message = _text(error.get("warning", ""))
            if message not in out.errors:
                out.errors.append(message)
    return out
