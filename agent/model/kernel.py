"""Kernel-log events: what the kernel and the drivers said, parsed but not judged.

One event per matching log line, in log order, with no de-duplication: a single GPU fault
prints a burst of identical Xid lines (16 Xid 13 lines within 2 ms in gpud's
``dmesg.decode.iso.log``), and whether that is one problem or sixteen is the checks'
call. Every event keeps ``raw`` so a finding can quote the evidence and a saved snapshot
can be re-parsed by a later version.

Times: ``time`` is epoch seconds, set only when the line carries an absolute wall time
(ISO, ``dmesg -T`` ctime, a syslog/journal prefix whose month we can read) or when it is
a ``/dev/kmsg`` record and the boot time is known. ``uptime_s`` is the kernel's monotonic
clock (``[  123.456]`` or the kmsg microsecond field). A line may carry both or neither.
"""

from __future__ import annotations

from .record import field, record


@record
class XidEvent:
    """``NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after ...``.

    ``pci_bdf`` is normalised to ``dddd:bb:dd.f`` (lower case, function ``.0`` when the
    driver omits it) so it joins with NVML's bus id and sysfs; empty when the line's
    address was elided (``Xid (PCI:...)``). ``pid``/``process`` are None
    when the driver printed ``<unknown>`` or no such field; ``message`` is the text after
    them. ``gpu_instance`` is the MIG GPU instance of ``(PCI:... GPU-I:05)`` lines.
    """

    xid: int
    pci_bdf: str
    pid: int | None
    process: str | None
    message: str
    raw: str
    gpu_instance: int | None = None
    time: float | None = None
    uptime_s: float | None = None


@record
class SxidEvent:
    """``nvidia-nvswitch1: SXid (PCI:0000:06:00.0): 20034, Fatal, Link 48 LTSSM Fault Up``.

    ``message`` is the text after the code, severity word included (``Fatal, ...``); the
    driver also prints ``Severity ...`` and ``Data {...}`` continuation lines with the same
    code, which are events too. ``switch_device`` is the kernel device name
    (``nvidia-nvswitch1``) so a finding can name the switch, not only its bus id.
    """

    sxid: int
    pci_bdf: str
    message: str
    raw: str
    time: float | None = None
    uptime_s: float | None = None
    switch_device: str | None = None


@record
class KernelEvent:
    """Another kernel line a check cares about; ``kind`` says which family.

    Kinds: ``mce``, ``hung_task``, ``soft_lockup``, ``hard_lockup``, ``nmi``,
    ``gpu_reset``, ``mlx5_probe_failed``, ``mlx5_health``, ``pcie_slot_power``,
    ``module_temperature``, ``aer``, ``cper``
    (see ``agent/collectors/kernel_log.py`` for the line formats and where each comes from).
    A ``cper`` event is one whole APEI/GHES hardware error record: ``message`` holds its
    lines' texts after ``{N}[Hardware Error]:``, one per line, ``raw`` the lines as read.
    ``message`` is the text after the timestamp/host prefix; ``device`` is the normalised
    PCI bus id the line names (for ``aer``, the device that reported the error), or the
    GPU UUID for a ``gpu_reset`` acknowledgement that names only a UUID.
    ``previous_boot`` marks a ``cper`` record the firmware handed over at this boot
    (ACPI BERT): its error happened in the boot before, whatever its line's time says.
    """

    kind: str
    message: str
    raw: str
    device: str | None = None
    time: float | None = None
    uptime_s: float | None = None
    previous_boot: bool = False


# The most previous-boot records a snapshot holds: a boot a fatal error ended has one or
# two; the rest of a long list would be repeats the kernel printed before it.
MAX_PREVIOUS_BOOT_RECORDS = 16


@record
class BootRecord:
    """One hardware error record of the previous boot, with the id the agent keeps it
    under (``clusterdiag agent --clear ID`` clears it)."""

    id: str
    event: KernelEvent


@record
class PreviousBoot:
    """The kernel log of the boot before this one, as the agent read it at its start
    (``agent/collectors/previous_boot.py``): a fatal error usually takes the host down, so
    its record sits in the boot it ended. ``read`` says what was read, or why nothing
    was (no persistent journal, no previous boot, journalctl missing or too slow);
    ``records`` are the fatal and recoverable APEI/CPER records not yet cleared, at most
    ``MAX_PREVIOUS_BOOT_RECORDS``. None on every path but the agent's."""

    read: str
    records: list[BootRecord] = field(default_factory=list)


@record
class KernelLog:
    """Everything read from one kernel-log source.

    ``source`` says where it came from (``file:/path``, ``kmsg``, ``journal``);
    ``lines_read`` counts records/lines read whether or not they matched; ``unknown`` maps
    a part that could not be read (``file``, ``kmsg``) to the reason, so an empty event
    list is never mistaken for a clean log. ``dropped`` counts matching lines not kept:
    dated before the look-back window, or past the most a windowed read keeps of a kind
    (``agent/collectors/kernel_log.py``), so memory follows the window, not the log's length.
    """

    source: str
    xids: list[XidEvent] = field(default_factory=list)
    sxids: list[SxidEvent] = field(default_factory=list)
    events: list[KernelEvent] = field(default_factory=list)
    lines_read: int = 0
    boot_time: float | None = None
    unknown: dict[str, str] = field(default_factory=dict)
    dropped: int = 0
    previous_boot: PreviousBoot | None = None


__all__ = ["MAX_PREVIOUS_BOOT_RECORDS", "BootRecord", "KernelEvent", "KernelLog",
           "PreviousBoot", "SxidEvent", "XidEvent"]
