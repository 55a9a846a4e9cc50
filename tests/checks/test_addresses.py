"""One PCI address normaliser (agent/model/pci.py ``normalize_bdf``), and the checks that
used to normalise bus ids each their own way agreeing on every printed form.

gpu.count, gpu.xid and gpu.pcie_link matched addresses with the gpu family's normaliser
(which dropped the function), nvlink.remote with its own (a tuple), the kernel-log
parser with a third (which kept it). The forms below are the ones real tools print:
nvidia-smi and NVML's busId ``00000000:1B:00.0`` (8-digit upper-case domain, the Azure
VM capture's ``0000F8D6:00:00.0``), NVML's legacy busId and sysfs ``0000:1b:00.0``, Xid
lines ``PCI:0000:10:1c`` (no function) or ``PCI:0000:05:00.0``, lspci ``1b:00.0``.
"""

from __future__ import annotations

import dataclasses

import pytest

from clusterdiag.agent.model.gpu import NvLink
from clusterdiag.agent.model.pci import normalize_bdf, pci_address
from clusterdiag.checks.core.finding import Status
from clusterdiag.checks.profiles.profile import load_profile
from tests.checks.gpu.factory import (
    GENERIC,
    bridge,
    make_gpu,
    make_snap,
    only,
    pci_gpu,
    port,
    run,
    xid_line,
    xid_run,
)


@pytest.mark.parametrize(("text", "address"), [
    ("00000000:1B:00.0", "0000:1b:00.0"),  # NVML busId, nvidia-smi -q "Bus Id"
    ("0000:1B:00.0", "0000:1b:00.0"),  # NVML busIdLegacy
    ("0000:1b:00.0", "0000:1b:00.0"),  # sysfs
    ("0000:1b:00", "0000:1b:00.0"),  # an Xid line: the GPU's function
    ("1b:00.0", "0000:1b:00.0"),  # lspci without -D
    ("0000F8D6:00:00.0", "f8d6:00:00.0"),  # a VM's bus (real nvidia-smi XML capture)
    ("00000008:01:00.0", "0008:01:00.0"),  # GB200: a non-zero domain
    ("0000:10:1c", "0000:10:1c.0"),
    ("0000:3b:00.1", "0000:3b:00.1"),  # another function stays another device
    (" 0000:1b:00.0\n", "0000:1b:00.0"),
])
def test_every_printed_form_reads_as_one_address(text: str, address: str) -> None:
    assert normalize_bdf(text) == address
    assert normalize_bdf(address) == address  # what the collectors store is a fixed point


@pytest.mark.parametrize("text", [None, "", "gpu3", "GPU-00000000", "1b", "0000:1b:00.8",
                                  "0000:1b:00.", "0x1b:00.0", "000000000:1b:00.0",
                                  "0000:1b:000.0"])
def test_what_is_not_an_address_is_none(text: str | None) -> None:
    assert normalize_bdf(text) is None


def test_the_collectors_form_is_pci_address() -> None:
    assert pci_address(0, 0x1B, 0) == "0000:1b:00.0"
    assert pci_address(0x10000, 1, 2, 3) == "10000:01:02.3"


NVML_FORMS = ["00000000:1B:00.0", "0000:1b:00.0"]
PCI_FORMS = ["0000:1b:00.0", "0000:1B:00.0"]
XID_FORMS = ["0000:1b:00", "0000:1B:00.0", "00000000:1b:00.0", "1b:00.0"]


@pytest.mark.parametrize("nvml_form", NVML_FORMS)
@pytest.mark.parametrize("pci_form", PCI_FORMS)
def test_gpu_count_and_pcie_link_find_the_gpu_on_pci_whatever_the_form(
        nvml_form: str, pci_form: str) -> None:
    gpu = make_gpu(0, pci_bdf=nvml_form)
    pci = [bridge(0), pci_gpu(0, bdf=pci_form, path=[port(0), pci_form])]
    snap = make_snap([gpu], pci=pci)
    assert not only(run("gpu.count", snap, GENERIC), Status.FAIL)
    # Only sysfs knows the GPU's maximum width here: found, the width is judged.
    (width, _gen) = run("gpu.pcie_link", snap, GENERIC)
    assert (width.status, width.message) == (Status.PASS, "PCIe link width at maximum")


def test_gpu_count_and_pcie_link_tell_another_bus_apart() -> None:
    """The control for the test above: a GPU on PCI at another bus is not the NVML one."""
    gpu = make_gpu(0, pci_bdf="00000000:1B:00.0")
    pci = [bridge(0), pci_gpu(0, bdf="0000:2b:00.0", path=[port(0), "0000:2b:00.0"])]
    snap = make_snap([gpu], pci=pci)
    (fail,) = only(run("gpu.count", snap, GENERIC), Status.FAIL)
    assert fail.message == "GPU on PCI but not enumerated by NVML"
    assert run("gpu.pcie_link", snap, GENERIC)[0].status is Status.SKIP
    # Another function of the same device is another device too.
    pci = [bridge(0), pci_gpu(0, bdf="0000:1b:00.1", path=[port(0), "0000:1b:00.1"])]
    assert only(run("gpu.count", make_snap([gpu], pci=pci), GENERIC), Status.FAIL)


@pytest.mark.parametrize("nvml_form", NVML_FORMS)
@pytest.mark.parametrize("xid_form", XID_FORMS)
def test_an_xid_line_is_the_gpus_whatever_the_form(nvml_form: str, xid_form: str) -> None:
    gpu = make_gpu(0, pci_bdf=nvml_form)
    findings = xid_run(xid_line(79, pci=xid_form), gpus=[gpu])
    assert [f.component for f in only(findings, Status.FAIL)] == ["gpu0"]
    other = xid_run(xid_line(79, pci="0000:2b:00"), gpus=[gpu])
    assert [(f.component, f.observed["gpu"]) for f in only(other, Status.FAIL)] == [
        ("node", "0000:2b:00")]


@pytest.mark.parametrize("nvml_form", NVML_FORMS)
@pytest.mark.parametrize("peer_form", ["0000:2b:00.0", "00000000:2B:00.0", "2b:00.0"])
def test_an_nvlink_peer_is_a_local_gpu_whatever_the_form(nvml_form: str,
                                                          peer_form: str) -> None:
    gpus = [make_gpu(0, pci_bdf=nvml_form), make_gpu(1, pci_bdf="00000000:2B:00.0")]
    for gpu, peer in ((gpus[0], peer_form), (gpus[1], nvml_form)):
        gpu.nvlinks = [NvLink(link=n, active=True, version=6, remote_type="gpu",
                              remote_bdf=peer) for n in range(2)]
        gpu.nvswitch_link_count = 0
    profile = dataclasses.replace(load_profile("hgx-h100-pcie"), nvlinks_per_gpu=2,
                                  nvlink_version=6)
    findings = run("nvlink.remote", make_snap(gpus, p2p_nvlink={"0-1": "ok"}), profile)
    assert [(f.status, f.component) for f in findings] == [
        (Status.PASS, "gpu0"), (Status.PASS, "gpu1")]
    gpus[0].nvlinks[1].remote_bdf = "0000:3b:00.0"
    findings = run("nvlink.remote", make_snap(gpus, p2p_nvlink={"0-1": "ok"}), profile)
    assert [f.component for f in only(findings, Status.FAIL)] == ["gpu0.link1"]
