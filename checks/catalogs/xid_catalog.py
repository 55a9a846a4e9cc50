"""What each XID (GPU) and SXid (NVSwitch) code means for a node's readiness.

The GPU codes are data: ``xid_catalog.tsv`` beside this module is NVIDIA's published Xid
Catalog (its code, mnemonic and the two "Resolution Bucket" columns; the file's header
names the document and the date it was read). This module turns NVIDIA's *immediate*
bucket into a verdict by one rule per bucket, so the verdict can be traced to the
catalog line and changes when the data does:

- ``RESET_GPU``, ``WORKFLOW_XID_48``, ``WORKFLOW_NVLINK_ERR`` (74): fail, ``reset_gpu``.
- ``RESTART_BM`` (79) and ``RESTART_VM`` (151): fail, ``reboot`` (a VM's restart is the
  reboot of the node the scheduler sees).
- ``CHECK_MECHANICALS`` (54, auxiliary power not connected): fail, ``reseat_cable`` (the
  board's power cable; the GPU runs power-capped until it is fixed).
- Codes NVIDIA leaves without a bucket whose meaning is fatal to the GPU fail too:
  167 PCIe fatal timeout (``reboot``, as 79), 168 reduced memory capacity (``rma``),
  169 SEC2 micro-controller halt (``reset_gpu``, as 62's PMU halt), 171/172
  uncorrectable DRAM/SRAM detail of a Xid 48 (``reset_gpu``, as 48).
- ``XID_154`` and ``WORKFLOW_NVLINK5_ERR`` (144-150) are decoded from the line by
  ``gpu.xid`` (the new recovery action; the ``Fatal``/``Nonfatal`` token); the table
  gives them a base that never fails on its own.
- Everything else never fails on one occurrence. ``RESTART_APP``, ``WORKFLOW_XID_45`` and
  ``CHECK_UVM`` describe the job: ``application`` codes, counted per job, that warn when
  one GPU produces them in ``repeat_threshold`` jobs. ``IGNORE`` and the remaining
  codes without a bucket are informational; ``CONTACT_SUPPORT`` (mostly codes NVIDIA
  marks unused) and ``UPDATE_SWFW`` warn, so an odd code is seen and not acted on.

Fields of :class:`XidInfo`: ``severity`` is what the code means once it counts (``fail``,
``warn`` or ``info``); ``action`` the operator's next step (a Finding action);
``application`` and ``repeat_threshold`` as above (a burst of identical lines is one
occurrence; ``gpu.xid``'s config can override the threshold); ``immediate`` and
``investigatory`` are NVIDIA's buckets as the data file has them.

An unknown code returns None and ``gpu.xid`` warns, so a new driver's code is seen
rather than silently passed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ...agent.model.record import record

Severity = Literal["fail", "warn", "info"]
XidAction = Literal[
    "none", "reset_gpu", "reboot", "drain", "rma", "reseat_cable", "fix_config", "investigate"
]


@record(frozen=True)
class XidInfo:
    code: int
    name: str  # NVIDIA's mnemonic without its ROBUST_CHANNEL_ prefix; SXid: FM user guide
    severity: Severity
    action: XidAction
    application: bool = False
    repeat_threshold: int = 1
    immediate: str = ""  # NVIDIA's immediate bucket ("" where it has none; SXids)
    investigatory: str = ""


# NVIDIA's immediate bucket -> (severity, action, application); see the module doc.
_BUCKETS: dict[str, tuple[Severity, XidAction, bool]] = {
    "RESET_GPU": ("fail", "reset_gpu", False),
    "WORKFLOW_XID_48": ("fail", "reset_gpu", False),
    "WORKFLOW_NVLINK_ERR": ("fail", "reset_gpu", False),
    "RESTART_BM": ("fail", "reboot", False),
    "RESTART_VM": ("fail", "reboot", False),
    "CHECK_MECHANICALS": ("fail", "reseat_cable", False),
    "RESTART_APP": ("warn", "investigate", True),
    "CHECK_UVM": ("warn", "investigate", True),
    "WORKFLOW_XID_45": ("info", "none", True),
    "IGNORE": ("info", "none", False),
    "CONTACT_SUPPORT": ("warn", "investigate", False),
    "UPDATE_SWFW": ("warn", "fix_config", False),
    "XID_154": ("info", "none", False),  # gpu.xid acts on the line's new recovery action
    # gpu.xid fails a Fatal line; a Nonfatal one (or one without the token) only counts
    # when it repeats.
    "WORKFLOW_NVLINK5_ERR": ("warn", "investigate", False),
    "-": ("info", "none", False),
}
# Codes with no immediate bucket whose meaning is fatal to the GPU (module doc).
_NO_BUCKET_FATAL: dict[int, XidAction] = {167: "reboot", 168: "rma", 169: "reset_gpu",
                                          171: "reset_gpu", 172: "reset_gpu"}
# Application codes: distinct jobs on one GPU before the code warns (NVIDIA's
# WORKFLOW_XID_13/31 look for repeats on the same hardware).
APPLICATION_REPEATS = 3
# Nonfatal NVLink5 lines: occurrences (bursts) before they warn.
NVLINK5_REPEATS = 3
NVLINK5 = range(144, 151)
# Prefixes most mnemonics share, left out of the names findings print.
_LONG_PREFIXES = ("ROBUST_CHANNEL_FIFO_ERROR_", "ROBUST_CHANNEL_")


def _info(code: int, name: str, immediate: str, investigatory: str) -> XidInfo:
    severity, action, application = _BUCKETS.get(immediate, ("warn", "investigate", False))
    if code in _NO_BUCKET_FATAL:
        severity, action = "fail", _NO_BUCKET_FATAL[code]
    repeats = APPLICATION_REPEATS if application and severity == "warn" else \
        NVLINK5_REPEATS if code in NVLINK5 else 1
    bucket = "" if immediate == "-" else immediate
    for prefix in _LONG_PREFIXES:  # "Xid 79 (GPU_HAS_FALLEN_OFF_THE_BUS)" in a message
        name = name.removeprefix(prefix)
    return XidInfo(code, name, severity, action, application, repeats, bucket,
                   "" if investigatory == "-" else investigatory)


def _load() -> dict[int, XidInfo]:
    """Parse the data file (tab-separated, ``#`` comments, one header line)."""
    text = Path(__file__).with_name("xid_catalog.tsv").read_text("utf-8")
    rows = [line.split("\t") for line in text.splitlines()
            if line.strip() and not line.startswith("#")]
    table: dict[int, XidInfo] = {}
    for fields in rows[1:]:
        code, name, immediate, investigatory = (f.strip() for f in fields)
        table[int(code)] = _info(int(code), name, immediate, investigatory)
    return table


XID_CATALOG: dict[int, XidInfo] = _load()


def _table(*entries: XidInfo) -> dict[int, XidInfo]:
    return {entry.code: entry for entry in entries}


SXID_CATALOG: dict[int, XidInfo] = _table(
    # The nvidia-nvswitch driver's SXid lines, classified by the Fabric Manager user guide
    # (DU-09883-001) as mirrored in gpud components/accelerator/nvidia/sxid/sxid.go.
    # 20034 "LTSSM Fault Up": D.5 potentially fatal, the link went down from active; on
    # H100 the guide says reset the GPU.
    XidInfo(20034, "LTSSM_FAULT_UP", "fail", "reset_gpu"),
    # 12028 "egress nonposted PRIV error": listed non-fatal, but "GPU NVLink traffic will
    # be stalled, and subsequent GPU access will hang" (jobs abort with Xid 45); recovery
    # is a restart.
    XidInfo(12028, "EGRESS_NONPOSTED_PRIV_ERROR", "fail", "reboot"),
    # 20009 "RX Short Error Rate" (the driver prints it Non-fatal): a link-quality signal.
    XidInfo(20009, "RX_SHORT_ERROR_RATE", "warn", "investigate"),
)


def xid_info(code: int) -> XidInfo | None:
    """The catalog entry for a GPU Xid, or None when the code is not in the table."""
    return XID_CATALOG.get(code)


def sxid_info(code: int) -> XidInfo | None:
    """The catalog entry for an NVSwitch SXid, or None when the code is not in the table."""
    return SXID_CATALOG.get(code)


__all__ = ["SXID_CATALOG", "XID_CATALOG", "XidInfo", "sxid_info", "xid_info"]
