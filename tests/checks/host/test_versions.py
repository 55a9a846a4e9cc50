"""host.versions (checks/host/versions.py): the versions a captured profile expects, warn-only."""

from __future__ import annotations

import dataclasses

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.ib import IbDevice
from clusterdiag.checks import REGISTRY
from clusterdiag.checks.core.finding import Action, Status
from clusterdiag.checks.host import versions as versions_checks
from clusterdiag.checks.profiles.profile import Profile, load_profile
from tests.checks.harness import run_check
from tests.checks.nvlink.factory import make_gpu, make_snapshot

SITE = dataclasses.replace(load_profile("hgx-h100-8gpu"), driver_versions=("570.86.15",),
                           vbios_versions=("96.00.A5.00.01",), nic_firmware=("28.41.1000",))


def _judge(snap: Snapshot, profile: Profile = SITE) -> list[tuple[str, Status]]:
    findings = run_check("host.versions", snap, profile=profile)
    assert all(f.status in (Status.PASS, Status.WARN, Status.SKIP) for f in findings)
    assert all(f.action in (Action.NONE, Action.FIX_CONFIG) for f in findings)
    return [(f.component, f.status) for f in findings]


def _snap(vbios: str = "96.00.A5.00.01", fw: str = "28.41.1000") -> Snapshot:
    gpus = [make_gpu(i, vbios=vbios if i == 2 else "96.00.A5.00.01") for i in range(8)]
    rail = IbDevice("mlx5_0", fw_ver=fw, role="compute")
    storage = IbDevice("mlx5_1", fw_ver="22.39.1002", role="storage")  # not a rail: not judged
    return make_snapshot(gpus=gpus, infiniband=[rail, storage])


def test_the_expected_versions_pass_and_others_warn_on_their_part() -> None:
    assert versions_checks.__name__ == REGISTRY["host.versions"].func.__module__
    assert set(_judge(_snap())) == {("node", Status.PASS), ("mlx5_0", Status.PASS),
                                    *((f"gpu{i}", Status.PASS) for i in range(8))}
    bad = [c for c, s in _judge(_snap(vbios="96.00.99.00.01", fw="28.39.1002"))
           if s is Status.WARN]
    assert sorted(bad) == ["gpu2", "mlx5_0"]


def test_no_expectation_or_no_nvml_skips() -> None:
    assert _judge(_snap(), load_profile("dgx-h100")) == [("node", Status.SKIP)]
    snap = _snap()
    assert snap.nvml is not None
    snap.nvml.library_error = "NVML Shared Library Not Found"
    got = _judge(snap)
    assert ("node", Status.SKIP) in got
    assert ("mlx5_0", Status.PASS) in got  # the NICs are judged without NVML
