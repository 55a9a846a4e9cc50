"""PCI VPD as the IB collector reads it (collectors/vpd.py) and what the checks take from it
(model/ib.py): the ConnectX-7 functions that manage an HGX B200's NVSwitches."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from clusterdiag.agent.collectors import vpd
from clusterdiag.agent.model.ib import IbDevice, nvswitch_management, vpd_entries
from clusterdiag.agent.sim.state.ib import build_vpd
from clusterdiag.agent.sim.writers.vpd import encode_vpd

VA = b"MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:SMDL=SW_MNG:MODL=CX75310A"


def _blob(va: bytes = VA) -> bytes:
    """A VPD written out by hand from the PCI spec's layout (not by the simulator): an
    identifier string (tag 0x82, 16-bit little-endian length), VPD-R (tag 0x90) holding
    keyword fields (2 ASCII bytes, a length byte, the value) closed by RV, and the end tag
    0x78. The checksum byte makes the sum of every byte up to it zero."""
    ident = b"NVIDIA ConnectX-7"
    fields = (b"PN" + bytes([16]) + b"MCX75310AAS-NEAT"
              + b"SN" + bytes([12]) + b"MT2314XZ0JUZ"
              + b"VA" + bytes([len(va)]) + va
              + b"V0" + bytes([12]) + b"PCIeGen5 x16")
    ro_len = len(fields) + 4  # + "RV", its length byte, the checksum byte
    head = (bytes([0x82, len(ident), 0]) + ident + bytes([0x90, ro_len & 0xFF, ro_len >> 8])
            + fields + b"RV" + bytes([1]))
    return head + bytes([(-sum(head)) % 256, 0x78])


def test_a_vpd_written_byte_by_byte_parses_to_its_keywords() -> None:
    fields = vpd.parse_vpd(_blob())
    assert fields == {"PN": "MCX75310AAS-NEAT", "SN": "MT2314XZ0JUZ", "VA": VA.decode(),
                      "V0": "PCIeGen5 x16"}
    assert vpd_entries(fields)["SMDL"] == "SW_MNG"
    assert nvswitch_management(IbDevice("mlx5_12", vpd=fields))


def test_a_rail_without_smdl_and_the_comma_form_both_read_right() -> None:
    rail = vpd.parse_vpd(_blob(b"MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX713106A"))
    assert not nvswitch_management(IbDevice("mlx5_0", vpd=rail))
    # The form an NVIDIA engineer announced on linux-pci: a comma before SMDL.
    comma = vpd.parse_vpd(_blob(b"MLX:MN=MLNX:CSKU=V2:UUID=V3:PCI=V0:MODL=CX713106A,"
                                b"SMDL=SW_MNG"))
    assert nvswitch_management(IbDevice("mlx5_12", vpd=comma))
    # SMDL in a non-vendor keyword (PN) is not the marker.
    assert not nvswitch_management(IbDevice("x", vpd={"PN": "SMDL=SW_MNG"}))


def test_the_simulators_vpd_is_the_same_format() -> None:
    fields = vpd.parse_vpd(encode_vpd(build_vpd("NVIDIA ConnectX-7", "P1", "CX7", "n1/0", True)))
    assert fields["PN"] == "P1"
    assert vpd_entries(fields)["SMDL"] == "SW_MNG"
    assert "SMDL" not in vpd_entries(vpd.parse_vpd(encode_vpd(build_vpd("x", "P1", "CX7",
                                                                         "n1/0"))))


@pytest.mark.parametrize(("data", "why"), [
    (bytes([0x82, 0x10]), "cut short"),
    (bytes([0x82, 2, 0]) + b"ab" + bytes([0x78]), "no read-only"),
    (bytes([0x90, 4, 0]) + b"P\x01\x01x", "bad keyword"),
    (bytes([0x90, 5, 0]) + b"PN\x09ab", "runs past"),
    (bytes([0xFF, 0, 0]), "unknown resource tag"),
])
def test_what_is_not_vpd_is_refused_naming_the_fault(data: bytes, why: str) -> None:
    with pytest.raises(vpd.VpdError, match=why):
        vpd.parse_vpd(data)


def test_non_printable_bytes_in_a_value_are_neutralised() -> None:
    data = bytes([0x90, 7, 0]) + b"PN\x04a\x1b[m" + bytes([0x78])
    assert vpd.parse_vpd(data) == {"PN": "a?[m"}


def test_reads_give_keywords_none_or_the_reason(tmp_path: Path) -> None:
    good = tmp_path / "good" / "vpd"
    good.parent.mkdir()
    good.write_bytes(_blob())
    odd = tmp_path / "odd" / "vpd"
    odd.mkdir(parents=True)  # a directory where the file should be: unreadable, not absent
    junk = tmp_path / "junk" / "vpd"
    junk.parent.mkdir()
    junk.write_bytes(b"\xff\x00\x00")
    empty = tmp_path / "empty" / "vpd"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    none = str(tmp_path / "none" / "vpd")
    got = vpd.read_vpds([str(good), str(odd), str(junk), str(empty), none],
                        time.monotonic() + 30)
    assert isinstance(got[str(good)], dict)
    assert got[str(good)]["PN"] == "MCX75310AAS-NEAT"
    assert got[str(odd)] == "is a directory"
    assert str(got[str(junk)]).startswith("not VPD: unknown resource tag")
    assert got[str(empty)] is None
    assert got[none] is None


def test_a_read_that_hangs_is_given_up_and_not_started_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    calls: list[str] = []

    def stuck(path: str, limit: int) -> tuple[bytes | None, str | None]:
        calls.append(path)
        release.wait(60)
        return None, "missing"

    monkeypatch.setattr(vpd, "read_bytes", stuck)
    path = str(tmp_path / "wedged" / "vpd")
    first = vpd.read_vpds([path], time.monotonic() + 0.2)
    assert first[path] == "not read: no answer by the source's deadline"
    second = vpd.read_vpds([path], time.monotonic() + 0.2)
    assert second[path] == "not read: an earlier read of it has not returned"
    assert calls == [path]
    release.set()
    vpd._HUNG[path].join(30)
    assert vpd.read_vpds([path], time.monotonic() + 30)[path] is None


def test_what_was_read_is_kept_for_the_process(tmp_path: Path) -> None:
    """VPD does not change while a node is up: a second collection costs no read."""
    path = tmp_path / "vpd"
    path.write_bytes(_blob())
    first = vpd.read_vpds([str(path)], time.monotonic() + 30)[str(path)]
    path.write_bytes(_blob(b"MLX:MODL=OTHER"))
    assert vpd.read_vpds([str(path)], time.monotonic() + 30)[str(path)] == first


def test_a_function_without_vpd_is_not_asked_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No VPD is as fixed as a VPD; a read that failed is asked again next time."""
    calls: list[str] = []
    answers = {"absent": (None, vpd.MISSING), "denied": (None, "Permission denied (EACCES)")}

    def counted(path: str, limit: int) -> tuple[bytes | None, str | None]:
        calls.append(Path(path).parent.name)
        return answers[Path(path).parent.name]

    monkeypatch.setattr(vpd, "read_bytes", counted)
    paths = [str(tmp_path / name / "vpd") for name in answers]
    for _ in range(3):
        got = vpd.read_vpds(paths, time.monotonic() + 30)
        assert got == {paths[0]: None, paths[1]: "Permission denied (EACCES)"}
    assert calls.count("absent") == 1
    assert calls.count("denied") == 3
