"""The read-only Vital Product Data of the RDMA devices' PCI functions, as facts.

Why: on HGX/DGX B200 and B300 baseboards the NVSwitches are no PCI functions; the host
manages them through ConnectX-7 functions on the baseboard that appear as ``mlx5_*``
InfiniBand devices and say so only in their VPD (``SMDL=SW_MNG`` in the ``VA`` keyword:
agent/model/ib.py). Detection counts them and checks/core/rails.py keeps them out of the
rails; this module only records what the VPD says.

Format (PCI Local Bus spec §6.4, as the kernel's include/linux/pci.h encodes it): a
sequence of resource tags. A large tag is one byte with bit 7 set (0x82 identifier string,
0x90 read-only data VPD-R, 0x91 read-write data VPD-W) and a 16-bit little-endian length;
a small tag carries its length in bits 0-2, and 0x78 ends the data. VPD-R holds keyword
fields: two ASCII characters, one length byte, the value; ``RV`` (the checksum) closes it.

Reading costs: the kernel fetches VPD four bytes at a time through config space, polling
the function for each (drivers/pci/vpd.c), so a slow or wedged function can take long or
never answer. So only RDMA functions are read, at most ``MAX_BYTES`` of each, all at once
in threads, each given up at the deadline (an ``unknown`` naming it, never a guess); a
function whose earlier read still hangs is not read again; and what was read (a function
without VPD too) is kept for the life of the process, since VPD does not change while a
node is up (the agent reads each function once per boot). The sysfs file is root's only
(mode 0600): an agent running unprivileged records ``Permission denied (EACCES)``.
"""

from __future__ import annotations

import threading
import time

from ..read.sysfs import MISSING, read_bytes

# A ConnectX VPD is ~350 bytes (a ~140-byte identifier string, then VPD-R); VPD-R ends
# well inside this, and the kernel stops at the VPD's own size.
MAX_BYTES = 1024
MAX_KEYWORDS = 32
_ID_STRING, _READ_ONLY, _END = 0x82, 0x90, 0x78
_LARGE = 0x80
_CHECKSUM = "RV"

# Results by VPD file path, for this process: VPD is fixed while the node is up, and so is
# its absence (None: most RDMA functions of a DGX H100 have none, and each cycle would
# otherwise start a thread per function to find that out again). Failures are not kept.
_CACHE: dict[str, dict[str, str] | None] = {}
# Reads that did not answer by their deadline and may still be blocked in the kernel.
_HUNG: dict[str, threading.Thread] = {}
_LOCK = threading.Lock()


class VpdError(ValueError):
    """The VPD bytes are not the format: what is wrong and where."""


def _text(raw: bytes) -> str:
    return "".join(chr(b) if 32 <= b < 127 else "?" for b in raw).strip()


def parse_vpd(data: bytes) -> dict[str, str]:
    """The keyword fields of the VPD-R section of ``data``; VpdError when it is not VPD."""
    offset = 0
    while offset < len(data):
        tag = data[offset]
        if not tag & _LARGE:
            if tag & 0x78 == _END:
                break
            offset += 1 + (tag & 0x07)
            continue
        if offset + 3 > len(data):
            raise VpdError(f"large resource tag 0x{tag:02x} at {offset} cut short")
        size = data[offset + 1] | data[offset + 2] << 8
        body = data[offset + 3:offset + 3 + size]
        if tag == _READ_ONLY:
            return _read_only(body, offset)
        if tag != _ID_STRING and tag & 0x7F not in (0x10, 0x11):
            raise VpdError(f"unknown resource tag 0x{tag:02x} at {offset}")
        offset += 3 + size
    raise VpdError("no read-only (VPD-R) section")


def _read_only(body: bytes, at: int) -> dict[str, str]:
    fields: dict[str, str] = {}
    pos = 0
    while pos + 3 <= len(body) and len(fields) < MAX_KEYWORDS:
        keyword = _text(body[pos:pos + 2])
        length = body[pos + 2]
        if len(keyword) != 2 or not keyword.isalnum():
            raise VpdError(f"bad keyword {keyword!r} in VPD-R at {at + 3 + pos}")
        if keyword == _CHECKSUM:
            break
        if pos + 3 + length > len(body):
            raise VpdError(f"keyword {keyword} at {at + 3 + pos} runs past VPD-R")
        fields[keyword] = _text(body[pos + 3:pos + 3 + length])
        pos += 3 + length
    return fields


def _read_one(path: str, out: dict[str, dict[str, str] | str]) -> None:
    data, reason = read_bytes(path, MAX_BYTES)
    if data is None:
        out[path] = reason or "unreadable"
        return
    if not data:  # the kernel found no valid VPD in the function: none to record
        out[path] = MISSING
        return
    try:
        out[path] = parse_vpd(data)
    except VpdError as exc:
        out[path] = f"not VPD: {exc}"


def read_vpds(paths: list[str], deadline: float) -> dict[str, dict[str, str] | str | None]:
    """Each ``vpd`` file's keywords, a reason it could not be read, or None where the
    function has no VPD (the file is missing); no read waits past ``deadline``."""
    results: dict[str, dict[str, str] | str | None] = {}
    out: dict[str, dict[str, str] | str] = {}
    started: dict[str, threading.Thread] = {}
    with _LOCK:
        for path in paths:
            hung = _HUNG.get(path)
            if path in _CACHE:
                results[path] = _CACHE[path]
            elif hung is not None and hung.is_alive():
                results[path] = "not read: an earlier read of it has not returned"
            else:
                thread = threading.Thread(target=_read_one, args=(path, out), daemon=True,
                                          name="clusterdiag-vpd")
                thread.start()
                started[path] = thread
    for path, thread in started.items():
        thread.join(max(0.0, deadline - time.monotonic()))
        with _LOCK:
            if thread.is_alive():
                _HUNG[path] = thread
                results[path] = "not read: no answer by the source's deadline"
                continue
            _HUNG.pop(path, None)
            value = out.get(path, "unreadable")
            result = None if value == MISSING else value
            if not isinstance(result, str):
                _CACHE[path] = result
            results[path] = result
    return results


def vpd_path(device_dir: str) -> str:
    return f"{device_dir}/vpd"
