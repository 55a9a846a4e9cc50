"""sysfs.read_text: an attribute in one read() of a page, longer files whole up to the
limit, and the same reasons as before for what is not a regular file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterdiag.agent import sysfs
from clusterdiag.agent.sysfs import FileCounter, read_text


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real = os.read

    def counting(fd: int, size: int) -> bytes:
        sizes.append(size)
        return real(fd, size)

    monkeypatch.setattr(sysfs.os, "read", counting)
    return sizes


def test_an_attribute_is_one_read_of_a_page(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "rate").write_text("400 Gb/sec (4X NDR)\n")
    sizes = _count_reads(monkeypatch)
    counter = FileCounter()
    assert read_text(tmp_path / "rate", counter) == ("400 Gb/sec (4X NDR)", None)
    assert sizes == [4096]
    assert counter.count == 1


@pytest.mark.parametrize("size", [4095, 4096, 4097, 200_000])
def test_longer_files_are_read_whole(tmp_path: Path, size: int) -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(size))
    (tmp_path / "mounts").write_text(text)
    assert read_text(tmp_path / "mounts") == (text, None)


def test_the_limit_cuts_a_long_file(tmp_path: Path) -> None:
    (tmp_path / "big").write_text("x" * 10_000)
    assert read_text(tmp_path / "big", limit=5000) == ("x" * 5000, None)
    assert read_text(tmp_path / "big", limit=100) == ("x" * 100, None)


def test_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")  # never blocks: opened without waiting for a writer
    assert read_text(tmp_path / "fifo") == (None, "not a regular file")
    assert read_text(tmp_path) == (None, "is a directory")
    assert read_text(tmp_path / "absent") == (None, "missing")


@pytest.mark.parametrize(("content", "value"), [
    (b"0\n", 0), (b"12345\n", 12345), (b"18446744073709551615\n", (1 << 64) - 1)])
def test_read_decimal_takes_a_plain_number_in_one_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, value: int) -> None:
    (tmp_path / "port_xmit_wait").write_bytes(content)
    sizes = _count_reads(monkeypatch)
    counter = FileCounter()
    assert sysfs.read_decimal(str(tmp_path / "port_xmit_wait"), counter) == value
    assert sizes == [4096]
    assert counter.count == 1


@pytest.mark.parametrize("content", [
    b"", b"N/A (no PMA)\n", b"-1\n", b"1_000\n", b"0x10\n", b"12 34\n", b" 7\n",
    b"18446744073709551616\n", b"9" * 4096])
def test_read_decimal_leaves_anything_else_to_the_slow_path(tmp_path: Path,
                                                            content: bytes) -> None:
    """None, uncounted, so the caller reads the file again and says why."""
    (tmp_path / "counter").write_bytes(content)
    counter = FileCounter()
    assert sysfs.read_decimal(str(tmp_path / "counter"), counter) is None
    assert counter.count == 0


def test_read_decimal_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    for path in (tmp_path / "fifo", tmp_path, tmp_path / "absent"):
        assert sysfs.read_decimal(str(path)) is None
