"""DCGM's multi-node diagnostic and its prerequisites as a head tray of a simulated NVL72
rack answers them. No real capture of any of these outputs exists (the real GB200 captures
this project was given list ``dcgmi mndiag`` as missing); each form follows its source:

- ``dcgmi --version``: TCLAP's StdOutput::version (tclap 1.2, StdOutput.h), a blank line,
  ``dcgmi  version: <version>`` and a blank line, the version given to TCLAP's CmdLine by
  dcgmi (NVIDIA/DCGM dcgmi/CommandLineParser.cpp:132);
- ``dcgmi mndiag --run mnubergemm --hostList a;b --json``: the document dcgmi/MnDiag.cpp
  builds (HelperJsonBuildOutput and its helpers, :476-686; key names
  nvvs/include/NvvsJsonStrings.h:20-53, the name under ``NVVS_NAME``, "DCGM Diagnostic", :34)
  written by jsoncpp's toStyledString (MnDiag.cpp:470, the writer in sim/dcgmi.py), exit 0
  whatever the result (HelperDisplayAsJson returns DCGM_ST_OK once printed, :464-474). A GPU
  mnubergemm printed an ``MNUB [E]`` line for is ``Fail`` with that line's message as its
  warning, filed as DCGM_FR_UNKNOWN, category DCGM_FR_EC_HARDWARE_OTHER, severity
  DCGM_ERROR_TRIAGE; the test is named ``MNUBERGEMM``
  (modules/mndiag/MnDiagMpiMnubergemmRunner.cpp:65-67, 355-388);
- ``ssh -o BatchMode=yes ... <tray> true`` and bash's ``exec 3<>"/dev/tcp/$1/$2"``
  (the tray and 5555 as arguments): both print nothing and exit 0 where they succeed;
- ``nvidia-smi --query-compute-apps=pid --format=csv,noheader``: one pid a line, nothing on
  an idle GPU (nvidia-smi(1), --query-compute-apps).
"""

from __future__ import annotations

from collections.abc import Mapping

from .dcgmi import DCGM_VERSION, JsonValue, styled
from .state.hardware import SimNode
from .toolkit import NotModelled, Printed

MNDIAG_VERSION = "4.4.1"  # the first release with GB300 NVL (the mnubergemm reference page)
# What the runner files a GPU's error under (MnDiagMpiMnubergemmRunner.cpp:375-377), as
# dcgmlib/dcgm_errors.h numbers them (:34, :205, :183).
DCGM_FR_UNKNOWN = 1
DCGM_FR_EC_HARDWARE_OTHER = 15
DCGM_ERROR_TRIAGE = 4

# The probes a qualification sends (agent/qualify/mndiag.py), the only forms simulated.
SSH_OPTIONS = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
COMPUTE_APPS = ["--query-compute-apps=pid", "--format=csv,noheader"]


def port_probe(tray: str) -> list[str]:
    """bash's arguments that open the host engine's port 5555 on ``tray`` (the script
    takes the tray and the port as $1 and $2)."""
    return ["-c", 'exec 3<>"/dev/tcp/$1/$2"', "bash", tray, "5555"]


def version() -> Printed:
    return Printed(f"\ndcgmi  version: {MNDIAG_VERSION}\n\n")


def _hosts(argv: list[str]) -> list[str]:
    if "--hostList" not in argv or argv.index("--hostList") + 1 >= len(argv):
        raise NotModelled("dcgmi mndiag without --hostList is not simulated")
    hosts = argv[argv.index("--hostList") + 1].split(";")
    if any(":" in h or "=" in h for h in hosts):
        raise NotModelled("dcgmi mndiag with a port, socket or GPU list is not simulated")
    return hosts


def run(nodes: Mapping[str, SimNode], argv: list[str]) -> Printed:
    """``dcgmi mndiag --run mnubergemm --hostList a;b;c --json`` over simulated trays."""
    if argv[1:3] != ["mndiag", "--run"] or argv[3:4] != ["mnubergemm"] or (
            "--json" not in argv and "-j" not in argv):
        raise NotModelled(f"dcgmi {' '.join(argv[1:])} is not simulated")
    names = _hosts(argv)
    missing = [h for h in names if h not in nodes]
    if missing:
        raise NotModelled(f"dcgmi mndiag: {missing[0]} is no simulated tray")
    trays = [nodes[h] for h in names]
    hosts: list[JsonValue] = []
    results: list[JsonValue] = []
    for host_id, tray in enumerate(trays):
        hosts.append({"host_id": host_id, "hostname": tray.name, "dcgm_version": DCGM_VERSION,
                      "driver_version": tray.driver_version, "num_entities": len(tray.gpus),
                      "entities": [{"entity_group_id": 1, "entity_group": "GPU",
                                    "entity_id": g.index, "serial_num": g.serial}
                                   for g in tray.gpus]})
        for gpu in tray.gpus:
            entry: dict[str, JsonValue] = {"host_id": host_id, "entity_group_id": 1,
                                           "entity_group": "GPU", "entity_id": gpu.index,
                                           "status": "Pass"}
            message = tray.mndiag_errors.get(gpu.index)
            if message is not None:
                entry["status"] = "Fail"
                entry["warnings"] = [{"warning": message, "error_id": DCGM_FR_UNKNOWN,
                                      "error_category": DCGM_FR_EC_HARDWARE_OTHER,
                                      "error_severity": DCGM_ERROR_TRIAGE}]
            results.append(entry)
    failed = any(t.mndiag_errors for t in trays)
    status = "Fail" if failed else "Pass"
    document: JsonValue = {
        "DCGM Diagnostic": "DCGM Multi-Node Diagnostic",  # NVVS_NAME's value (MnDiag.cpp:491)
        "metadata": {"num_hosts": len(trays), "num_entities": sum(len(t.gpus) for t in trays)},
        "hosts": hosts,
        "test_categories": [{"category": "Multi-Node Tests", "tests": [
            {"name": "MNUBERGEMM", "status": status, "test_summary": {"status": status},
             "results": results}]}]}
    return Printed(styled(document))

