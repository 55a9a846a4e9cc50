"""host.disk and host.mounts (checks/host/storage.py)."""

from __future__ import annotations

import pytest

from clusterdiag.agent.model.host import DiskUsage, HostInfo, Mount
from clusterdiag.checks.core.finding import Action, Status
from tests.checks.host.factory import judge, one

# --- disk -------------------------------------------------------------------------------

def disk(path: str, free_pct: float, inodes_free_pct: float = 50.0) -> DiskUsage:
    return DiskUsage(path, 1000, int(free_pct * 10), 1000, int(inodes_free_pct * 10))


@pytest.mark.parametrize(("pct", "status"), [(50, Status.PASS), (9.9, Status.WARN),
                                             (10, Status.PASS), (4.9, Status.FAIL)])
def test_disk_space_thresholds(pct: float, status: Status) -> None:
    findings = judge("host.disk", HostInfo("n1", disks=[disk("/", pct), disk("/tmp", 50)]))
    by_path = {f.component: f for f in findings if "space" in f.message}
    assert by_path["/"].status is status
    assert by_path["/tmp"].status is Status.PASS


def test_disk_inodes_judged_separately() -> None:
    findings = judge("host.disk", HostInfo("n1", disks=[disk("/", 50, 1), disk("/tmp", 50)]))
    assert [(f.component, f.status) for f in findings if f.status is not Status.PASS] == [
        ("/", Status.FAIL)]
    assert "inodes" in findings[1].message


def test_disk_messages_group_across_nodes() -> None:
    one_node = judge("host.disk", HostInfo("n1", disks=[disk("/", 1)]), paths=["/"])
    other = judge("host.disk", HostInfo("n2", disks=[disk("/", 3)]), paths=["/"])
    assert one_node[0].message == other[0].message
    assert one_node[0].observed != other[0].observed


def test_disk_error_missing_and_sizeless() -> None:
    info = HostInfo("n1", disks=[DiskUsage("/", error="No such file or directory"),
                                 DiskUsage("/proc", 0, 0, 0, 0)])
    findings = judge("host.disk", info, paths=["/", "/proc", "/scratch"])
    assert [(f.component, f.status) for f in findings] == [
        ("/", Status.ERROR), ("/proc", Status.SKIP), ("/scratch", Status.ERROR)]
    assert findings[0].observed == "No such file or directory"


def test_disk_without_inode_count_judges_space_only() -> None:
    info = HostInfo("n1", disks=[DiskUsage("/", 1000, 500, 0, 0)])  # btrfs
    assert [f.message for f in judge("host.disk", info, paths=["/"])] == ["enough free space"]


# --- mounts -----------------------------------------------------------------------------

MOUNTS = [Mount("/", "ext4", "/dev/nvme0n1p2"), Mount("/home", "nfs4", "10.0.0.5:/home"),
          Mount("/scratch", "ext4", "/dev/md0"), Mount("/scratch", "lustre", "mds@o2ib:/fs")]


def test_mounts_skip_when_none_required() -> None:
    assert one(judge("host.mounts", HostInfo("n1", mounts=MOUNTS))).status is Status.SKIP


def test_mounts_pass_fail_and_wrong_type() -> None:
    required = ["/home", {"path": "/scratch", "fstype": "lustre"},
                {"path": "/home", "fstype": "nfs"}, "/data"]
    findings = judge("host.mounts", HostInfo("n1", mounts=MOUNTS), required=required)
    assert [(f.component, f.status) for f in findings] == [
        ("/home", Status.PASS), ("/scratch", Status.PASS), ("/home", Status.FAIL),
        ("/data", Status.FAIL)]
    assert findings[2].observed == "nfs4"
    assert findings[2].action is Action.FIX_CONFIG
    assert findings[3].message == "required filesystem not mounted"


def test_mounts_invalid_entry_and_unreadable_table() -> None:
    findings = judge("host.mounts", HostInfo("n1", mounts=MOUNTS), required=[{"fstype": "x"}])
    assert one(findings).status is Status.ERROR
    info = HostInfo("n1", unknown={"mounts": "/proc/mounts: missing"})
    assert one(judge("host.mounts", info, required=["/"])).status is Status.ERROR
