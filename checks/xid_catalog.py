"""What each XID (GPU) and SXid (NVSwitch) code means for a node's readiness.

A table, not logic: ``gpu.xid`` and ``nvswitch.sxid`` look a code up here and decide with
the log's own words (NVLink5's ``Fatal``/``Nonfatal``, Xid 154's new recovery action) and
the counts in their window. An unknown code returns None and the check warns, so a new
driver's code is seen rather than silently passed.

Fields:
- ``severity`` is what the code means once it counts: ``fail`` (node not ready),
  ``warn`` or ``info``.
- ``action`` is the operator's next step, one of the Finding actions.
- ``application`` marks codes that describe the job (or a recorded, handled event) rather
  than the GPU: they never fail a node by themselves, only by repetition across jobs.
- ``repeat_threshold`` is how many occurrences in the check's window it takes before the
  code counts, after the check has folded a burst into one occurrence (one fault prints
  many identical lines: 16 Xid 13 lines within 2 ms in gpud's ``dmesg.decode.iso.log``).
  The check's config can override it.

Sources: hardware.md §5.2 (NVIDIA's XID catalog as mirrored in gpud
``components/accelerator/nvidia/xid/catalog_generated.go``, generated 2025-10-29, and the
"Agent verdict" column) and §5.3 (escalation rules), cited per group below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["fail", "warn", "info"]
XidAction = Literal[
    "none", "reset_gpu", "reboot", "drain", "rma", "reseat_cable", "fix_config", "investigate"
]


@dataclass(frozen=True)
class XidInfo:
    code: int
    name: str  # NVIDIA's catalog mnemonic, shortened; SXid names from the FM user guide
    severity: Severity
    action: XidAction
    application: bool = False
    repeat_threshold: int = 1


def _table(*entries: XidInfo) -> dict[int, XidInfo]:
    return {entry.code: entry for entry in entries}


XID_CATALOG: dict[int, XidInfo] = _table(
    # Application errors (§5.3 rule 4; NVIDIA k8s-device-plugin skips 13/31/43/45/68 and
    # §5.2 adds 63/92/94 as non-fatal for the node): attribute to the job; the node is
    # suspect only when the same GPU keeps producing them across jobs.
    XidInfo(13, "GR_EXCEPTION", "warn", "investigate", application=True, repeat_threshold=3),
    XidInfo(31, "MMU_ERR_FLT", "warn", "investigate", application=True, repeat_threshold=3),
    XidInfo(43, "RESETCHANNEL_VERIF_ERROR", "warn", "investigate", application=True,
            repeat_threshold=3),
    XidInfo(68, "NVDEC0_ERROR", "warn", "investigate", application=True, repeat_threshold=3),
    # 45 is the cleanup after another error (NVIDIA: "Not Solo: IGNORE (follow other Xid)").
    XidInfo(45, "PREEMPTIVE_REMOVAL", "info", "none", application=True),
    # Recorded, handled memory events (§5.2): 63 a row remap recorded (gpu.row_remap owns
    # the pending-remap reset), 92 a high corrected-ECC rate (watch the counters), 94 a
    # contained error that killed only the faulting job; its remap needs a GPU reset.
    XidInfo(63, "DRAM_RETIREMENT_EVENT", "info", "none", application=True),
    XidInfo(92, "EXCESSIVE_SBE_INTERRUPTS", "warn", "investigate", application=True),
    XidInfo(94, "CONTAINED_ERROR", "warn", "reset_gpu", application=True),
    # Software-side errors that implicate the GPU only when repeated (§5.2 verdicts:
    # 32 "degrade; drain if repeated", 69 "app error unless repeated", 109 "reset if
    # repeated"); 38 (driver firmware watchdog: IGNORE / CONTACT_SUPPORT) and 137 (NVLink
    # privilege error: IGNORE / XID_137_FLOW) are looked at, not acted on.
    XidInfo(32, "PBDMA_ERROR", "fail", "drain", repeat_threshold=2),
    XidInfo(69, "GR_CLASS_ERROR", "warn", "investigate", repeat_threshold=3),
    XidInfo(109, "CTXSW_TIMEOUT_ERROR", "warn", "reset_gpu", repeat_threshold=2),
    XidInfo(38, "FECS_ERR_WATCHDOG_TIMEOUT", "warn", "investigate"),
    XidInfo(137, "NVLINK_PRIV_ERR", "warn", "investigate"),
    # The GPU is gone or wedged (§5.3 rule 1): 79 fallen off the bus, 119 GSP RPC timeout
    # (NVML calls hang) -> drain and reboot; repeat -> RMA.
    XidInfo(79, "GPU_HAS_FALLEN_OFF_THE_BUS", "fail", "reboot"),
    XidInfo(119, "GSP_RPC_TIMEOUT", "fail", "reboot"),
    # 61: catalog "Unused", §5.2 verdict "reboot + ticket if seen".
    XidInfo(61, "PMU_BREAKPOINT", "fail", "reboot"),
    # Uncorrectable memory and firmware faults (§5.3 rule 2): drain, reset the GPU, then
    # verify ECC and row remapping; a failure to recover is an RMA.
    XidInfo(48, "GPU_ECC_DBE", "fail", "reset_gpu"),
    XidInfo(62, "PMU_HALT_ERROR", "fail", "reset_gpu"),
    XidInfo(64, "DRAM_RETIREMENT_FAILURE", "fail", "reset_gpu"),
    XidInfo(95, "UNCONTAINED_ERROR", "fail", "reset_gpu"),
    XidInfo(110, "SEC_FAULT_ERROR", "fail", "reset_gpu"),
    XidInfo(120, "GSP_ERROR", "fail", "reset_gpu"),
    XidInfo(140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "fail", "reset_gpu"),
    XidInfo(143, "GPU_INIT_ERROR", "fail", "reset_gpu"),
    # NVLink (§5.3 rule 3): 74 and 136 (link training failed) drain and reset, then check
    # link and fabric state.
    XidInfo(74, "NVLINK_ERROR", "fail", "reset_gpu"),
    XidInfo(136, "ALI_TRAINING_FAIL", "fail", "reset_gpu"),
    # NVLink5 units on GB200/GB300 (§5.2 "Decoding 144-150"): the line's own Fatal/Nonfatal
    # token decides, so the base is warn and the check escalates a Fatal one and follows
    # the Xid 154 that comes after it.
    XidInfo(144, "NVLINK_SAW_ERROR", "warn", "investigate"),
    XidInfo(145, "NVLINK_RLW_ERROR", "warn", "investigate"),
    XidInfo(146, "NVLINK_TLW_ERROR", "warn", "investigate"),
    XidInfo(147, "NVLINK_TREX_ERROR", "warn", "investigate"),
    XidInfo(148, "NVLINK_NVLPW_CTRL_ERROR", "warn", "investigate"),
    XidInfo(149, "NVLINK_NETIR_ERROR", "warn", "investigate"),
    XidInfo(150, "NVLINK_MSE_ERROR", "warn", "investigate"),
    # 154 announces the driver's new required recovery action; the check acts on the new
    # value (0x1 reset, 0x2 reboot, 0x4 drain and reset, ...), the code alone is info.
    XidInfo(154, "GPU_RECOVERY_ACTION_CHANGED", "info", "none"),
    # 155 NVLink SW-defined error and 156 resource retirement (Blackwell memory repair):
    # NVIDIA RESET_GPU; §5.2 verdicts "reset" / "schedule reset" -> warn, not drain.
    XidInfo(155, "NVLINK_SW_DEFINED_ERROR", "warn", "reset_gpu"),
    XidInfo(156, "RESOURCE_RETIREMENT_EVENT", "warn", "reset_gpu"),
    # Catalog-only codes in the required range: 121 C2C error (IGNORE / CONTACT_SUPPORT,
    # "alert; repeat -> ticket"), 151 confidential-compute key rotation (RESTART_VM),
    # 152/153 DLA SMMU error / DLA timeout (IGNORE / CONTACT_SUPPORT).
    XidInfo(121, "C2C_ERROR", "warn", "investigate"),
    XidInfo(151, "KEY_ROTATION_ERROR", "warn", "reboot"),
    XidInfo(152, "DLA_SMMU_ERROR", "warn", "investigate"),
    XidInfo(153, "DLA_TIMEOUT", "warn", "investigate"),
)

SXID_CATALOG: dict[int, XidInfo] = _table(
    # hardware.md §5.1's SXid lines, classified by the Fabric Manager user guide
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
