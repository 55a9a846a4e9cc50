"""sysfs.read_text: an attribute in one read() of a page, longer files whole up to the
limit, and the same reasons as before for what is not a regular file."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from clusterdiag.agent.read import sysfs
from clusterdiag.agent.read.sysfs import FileCounter, read_text


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
def test_read_decimals_takes_a_plain_number_in_one_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes, value: int) -> None:
    (tmp_path / "port_xmit_wait").write_bytes(content)
    sizes = _count_reads(monkeypatch)
    counter = FileCounter()
    assert sysfs.read_decimals(str(tmp_path), counter) == {"port_xmit_wait": value}
    assert sizes == [4096]
    assert counter.count == 1


@pytest.mark.parametrize("content", [
    b"", b"N/A (no PMA)\n", b"-1\n", b"1_000\n", b"0x10\n", b"12 34\n", b" 7\n",
    b"18446744073709551616\n", b"9" * 4096])
def test_read_decimals_leaves_anything_else_to_the_slow_path(tmp_path: Path,
                                                             content: bytes) -> None:
    """None, uncounted, so the caller reads the file again and says why."""
    (tmp_path / "counter").write_bytes(content)
    (tmp_path / "plain").write_bytes(b"7\n")
    counter = FileCounter()
    assert sysfs.read_decimals(str(tmp_path), counter) == {"counter": None, "plain": 7}
    assert counter.count == 1


def test_read_decimals_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "sub").mkdir()
    assert sysfs.read_decimals(str(tmp_path)) == {"fifo": None, "sub": None}
    assert sysfs.read_decimals(str(tmp_path / "absent")) == {}
    assert sysfs.read_decimals(str(tmp_path / "fifo")) == {}  # not a directory


def test_read_decimals_opens_each_file_relative_to_the_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One path walk for the directory, a bare name per file."""
    for name in ("a", "b"):
        (tmp_path / name).write_text("1\n")
    opened: list[tuple[str, bool]] = []
    real = os.open

    def spy(path: str, flags: int, *args: int, dir_fd: int | None = None) -> int:
        opened.append((str(path), dir_fd is not None))
        return real(path, flags, *args, dir_fd=dir_fd)

    monkeypatch.setattr(sysfs.os, "open", spy)
    assert sysfs.read_decimals(str(tmp_path)) == {"a": 1, "b": 1}
    assert opened == [(str(tmp_path), False), ("a", True), ("b", True)]


def test_read_decimals_out_of_descriptors_is_read_failed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def exhausted(path: str, flags: int, *args: int, **kwargs: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(sysfs.os, "open", exhausted)
    with pytest.raises(sysfs.ReadFailed, match="EMFILE"):
        sysfs.read_decimals(str(tmp_path))
