"""APEI/GHES hardware error records in the kernel log: one ``cper`` event per record
(agent/collectors/kernel_log.py).

The records are constructed in the exact format of the kernel's printk format strings
(drivers/acpi/apei/ghes.c __ghes_print_estatus: ``{N}`` + HW_ERR; drivers/firmware/efi/
cper.c cper_estatus_print, cper_estatus_print_section, cper_print_mem; cper-arm.c
cper_print_proc_arm); no real Grace record under a licence that allows copying was found.
The wrapper (``[uptime] {N}[Hardware Error]:``, two spaces per section level) matches the
lines quoted in nodejs/build#2894 (an Ampere Altra arm64 host).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdiag.agent.collectors import kernel_log
from clusterdiag.agent.collectors.kernel_log import parse_lines, read_file

NOW = 1_700_000_000.0

FATAL_MEMORY = [
    "{3}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 2",
    "{3}[Hardware Error]: event severity: fatal",
    "{3}[Hardware Error]:  Error 0, type: fatal",
    "{3}[Hardware Error]:   section_type: memory error",
    "{3}[Hardware Error]:    error_status: Storage error in DRAM memory (0x0000000000000400)",
    "{3}[Hardware Error]:   physical_address: 0x000000a1b2c3d000",
    "{3}[Hardware Error]:   node:0 card:0 module:3 rank:0 bank:5 device:2 row:1234 column:56 ",
    "{3}[Hardware Error]:   error_type: 3, multi-bit ECC",
]
CORRECTED_ARM = [
    "{4}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1",
    "{4}[Hardware Error]: It has been corrected by h/w and requires no further action",
    "{4}[Hardware Error]: event severity: corrected",
    "{4}[Hardware Error]:  Error 0, type: corrected",
    "{4}[Hardware Error]:   section_type: ARM processor error",
    "{4}[Hardware Error]:   MIDR: 0x00000000410fd4f0",
    "{4}[Hardware Error]:   Multiprocessor Affinity Register (MPIDR): 0x0000000081470000",
    "{4}[Hardware Error]:   error affinity level: 0",
    "{4}[Hardware Error]:   Error info structure 0:",
    "{4}[Hardware Error]:   num errors: 1",
    "{4}[Hardware Error]:    error_type: 0, cache error",
]


def dmesg(lines: list[str], uptime: float) -> list[str]:
    return [f"[{uptime + i / 1e6:12.6f}] {line}" for i, line in enumerate(lines)]


def test_a_record_is_one_event_holding_every_line() -> None:
    log = parse_lines(dmesg(FATAL_MEMORY, 812.3) + dmesg(CORRECTED_ARM, 900.0), now=NOW)
    assert [e.kind for e in log.events] == ["cper", "cper"]
    fatal, corrected = log.events
    assert fatal.message.splitlines() == [line.split(": ", 1)[1].strip()
                                          for line in FATAL_MEMORY]
    assert len(fatal.raw.splitlines()) == len(FATAL_MEMORY)
    assert fatal.uptime_s == 812.3
    assert "MPIDR" in corrected.message


def test_another_drivers_line_between_two_records_lines_does_not_split_it() -> None:
    lines = [*FATAL_MEMORY[:3], "mlx5_core 0000:03:00.0: poll_health:813:(pid 0): "
             "device's health compromised - reached miss count", *FATAL_MEMORY[3:]]
    log = parse_lines(lines, now=NOW)
    cper = [e for e in log.events if e.kind == "cper"]
    assert len(cper) == 1
    assert "module:3" in cper[0].message


def test_lines_whose_header_was_not_read_are_no_event() -> None:
    log = parse_lines([*FATAL_MEMORY[1:], *CORRECTED_ARM], now=NOW)
    assert [e.message.splitlines()[2] for e in log.events] == ["event severity: corrected"]


def test_interleaved_records_keep_their_own_lines() -> None:
    lines = [FATAL_MEMORY[0], CORRECTED_ARM[0], *CORRECTED_ARM[1:], *FATAL_MEMORY[1:]]
    log = parse_lines(lines, now=NOW)
    # The fatal record's header is ended by the next header: its own lines after the
    # other record are no longer joined, so nothing is misattributed.
    assert [e.message.splitlines()[0] for e in log.events] == [
        "Hardware error from APEI Generic Hardware Error Source: 2",
        "Hardware error from APEI Generic Hardware Error Source: 1"]
    assert "event severity: corrected" in log.events[1].message
    assert "fatal" not in log.events[1].message


def test_a_long_record_keeps_a_bounded_number_of_lines() -> None:
    dump = [f"{{3}}[Hardware Error]:   {i:08x}: 00000000 00000000 00000000 00000000"
            for i in range(0, 16 * 500, 16)]
    log = parse_lines([*FATAL_MEMORY, *dump], now=NOW)
    assert len(log.events[0].raw.splitlines()) == kernel_log.CPER_MAX_LINES


def test_a_record_split_across_two_read_blocks_is_one_event(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file is read newest block first: a record whose lines run into the newer block is
    completed from it, and its tail alone is no event there."""
    monkeypatch.setattr(kernel_log, "_BLOCK_BYTES", 512)
    filler = [f"[{i:12.6f}] eth0: link is up at 100 Gbps" for i in range(1, 8)]
    lines = [*filler, *dmesg(FATAL_MEMORY, 812.3), *filler]
    path = tmp_path / "kern.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_file(path, now=NOW)
    assert [e.kind for e in log.events] == ["cper"]
    assert "module:3" in log.events[0].message
    assert len(log.events[0].raw.splitlines()) == len(FATAL_MEMORY)


# drivers/acpi/apei/bert.c bert_print_all(): the header once (pr_fmt "BERT: "), each
# record through cper_estatus_print(KERN_INFO HW_ERR, ...) with no "{N}" counter, then
# the total (kernels from 5.17 print it).
BERT_BLOCK = [
    "BERT: Error records from previous boot:",
    "[Hardware Error]: event severity: fatal",
    "[Hardware Error]:  Error 0, type: fatal",
    "[Hardware Error]:   section_type: memory error",
    "[Hardware Error]:   node:0 card:1 module:3 ",
    "[Hardware Error]: It has been corrected by h/w and requires no further action",
    "[Hardware Error]: event severity: corrected",
    "[Hardware Error]:  Error 0, type: corrected",
    "BERT: Total records found: 2",
]


def test_the_firmwares_records_of_the_previous_boot_are_cper_events_marked_so() -> None:
    log = parse_lines(dmesg(BERT_BLOCK, 2.1) + dmesg(FATAL_MEMORY, 900.0), now=NOW)
    assert [(e.kind, e.previous_boot) for e in log.events] == [
        ("cper", True), ("cper", True), ("cper", False)]
    fatal, corrected, _ = log.events
    assert fatal.message.splitlines() == ["event severity: fatal", "Error 0, type: fatal",
                                          "section_type: memory error",
                                          "node:0 card:1 module:3"]
    assert corrected.message.splitlines()[:2] == [
        "It has been corrected by h/w and requires no further action",
        "event severity: corrected"]
    assert fatal.uptime_s == pytest.approx(2.100001)


def test_bare_hardware_error_lines_outside_the_bert_block_are_no_record() -> None:
    lines = ["[Hardware Error]: event severity: fatal", *BERT_BLOCK[:2],
             "nvme nvme0: I/O 12 QID 3 timeout, aborting",  # needle-less: skipped
             "mce: [Hardware Error]: Machine check events logged",
             "[Hardware Error]: event severity: fatal"]
    log = parse_lines(dmesg(lines, 2.0), now=NOW)
    assert [(e.kind, e.previous_boot, e.message) for e in log.events] == [
        ("cper", True, "event severity: fatal"),
        ("mce", False, "mce: [Hardware Error]: Machine check events logged")]


def test_the_look_back_window_keeps_the_previous_boots_records(tmp_path: Path) -> None:
    boot = NOW - 5 * 3600
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/stat").write_text(f"cpu  1 0 1 1 0 0 0 0 0 0\nbtime {int(boot)}\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kmsg").write_text("".join(
        f"6,{n},{2_100_000 + n},-;{line}\n" for n, line in enumerate(BERT_BLOCK)))
    log = kernel_log.read_kmsg(tmp_path, 7200, now=NOW)
    assert [(e.kind, e.previous_boot) for e in log.events] == [("cper", True)] * 2
