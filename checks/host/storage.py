"""Disks and mounts: host.disk (free space and inodes) and host.mounts (required
mounts with the right type)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, host_info


@parameters
class DiskParams(Params):
    paths: tuple[str, ...] = param(("/", "/tmp"), doc="the mountpoints to measure")
    min_free_pct: float = param(
        5.0, ge=0, le=100, doc="free space in percent under which a path fails (under "
        "twice it, warns)")
    min_free_inodes_pct: float = param(
        5.0, ge=0, le=100, doc="free inodes in percent under which a path fails (under "
        "twice it, warns)")


@check("host.disk", needs=("host",), params=DiskParams,
       remedy="Free space or inodes (leftover job output, core dumps, container images, "
              "logs in /var or /tmp), or widen the thresholds in config.",
       actions=(Action.INVESTIGATE,))
def disk(ctx: CheckContext) -> Iterator[Finding]:
    """Free space and inodes on ``paths``: fail below the minimum, warn below twice it."""
    host = host_info(ctx)
    if isinstance(host, Finding):
        yield host
        return
    params = DiskParams.of(ctx)
    by_path = {d.path: d for d in host.disks}
    for path in params.paths:
        usage = by_path.get(path)
        if usage is None:
            yield Finding.error(path, "free space was not measured", "not in the snapshot")
        elif usage.error is not None:
            yield Finding.error(path, "cannot measure free space", usage.error)
        elif not usage.total_bytes or usage.free_bytes is None:
            yield Finding.skip(path, "filesystem reports no size")
        else:
            yield _free(path, "space", usage.free_bytes, usage.total_bytes,
                        params.min_free_pct)
            if usage.inodes_total and usage.inodes_free is not None:  # btrfs reports 0
                yield _free(path, "inodes", usage.inodes_free, usage.inodes_total,
                            params.min_free_inodes_pct)


def _free(path: str, what: str, free: int, total: int, minimum: float) -> Finding:
    pct = round(100.0 * free / total, 2)
    expected = f">= {minimum:g}% free"
    if pct < minimum:
        return Finding.fail(path, f"free {what} below the minimum", pct, expected)
    if pct < 2 * minimum:
        return Finding.warn(path, f"free {what} running low", pct, f">= {2 * minimum:g}% free")
    return Finding.passed(path, f"enough free {what}", pct, expected)


@parameters
class MountsParams(Params):
    required: tuple[str | Mapping[str, str], ...] = param(
        (), doc="the mounts that must be there: a path, or {path: ..., fstype: ...}")


@check("host.mounts", needs=("host",), params=MountsParams,
       remedy="Mount the filesystem (mount -a, or the automounter/systemd mount unit) and "
              "check why it was missing: a failed NFS/Lustre mount at boot is common.",
       actions=(Action.FIX_CONFIG,))
def mounts(ctx: CheckContext) -> Iterator[Finding]:
    """Every ``required`` mount is there with the right type.

    Entries are a path or ``{path: ..., fstype: ...}``. When several filesystems are
    stacked on one mountpoint the last one listed is the visible one, so it is judged.
    """
    host = host_info(ctx)
    required = MountsParams.of(ctx).required
    if isinstance(host, Finding):
        yield host
        return
    if not required:
        yield Finding.skip(NODE, "no required mounts configured")
        return
    if "mounts" in host.unknown:
        yield Finding.error(NODE, "mount table unreadable", host.unknown["mounts"])
        return
    visible = {m.mountpoint: m for m in host.mounts}
    for entry in required:
        path, fstype = _mount_entry(entry)
        if path is None:
            yield Finding.error(NODE, "invalid required mount entry", entry)
            continue
        mount = visible.get(path)
        if mount is None:
            yield Finding.fail(path, "required filesystem not mounted", None,
                               fstype or "mounted", Action.FIX_CONFIG)
        elif fstype is not None and mount.fstype != fstype:
            yield Finding.fail(path, "filesystem mounted with the wrong type", mount.fstype,
                               fstype, Action.FIX_CONFIG)
        else:
            yield Finding.passed(path, "required filesystem mounted", mount.fstype, fstype)


def _mount_entry(entry: Any) -> tuple[str | None, str | None]:
    """(path, fstype) of a ``required`` entry; path None when the entry is malformed."""
    if isinstance(entry, str):
        return entry, None
    if isinstance(entry, Mapping) and isinstance(entry.get("path"), str):
        fstype = entry.get("fstype")
        return entry["path"], fstype if isinstance(fstype, str) else None
    return None, None
