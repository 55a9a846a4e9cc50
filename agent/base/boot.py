"""Which boot of this machine it is: the kernel's boot_id, "a random string ... generated
anew at every boot" (proc_sys_kernel(5), /proc/sys/kernel/random/boot_id). What is true only
within one boot (the boot clock a sample is timed by, a sysfs entry's inode) is stored
with it."""

from __future__ import annotations


def boot_id() -> str | None:
    """This machine's boot_id; None where unreadable.

    Always the live machine's, whatever source a node is read from (a captured tree, the
    simulator): the clock and the files it dates are this machine's."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            return f.read(64).decode("ascii").strip() or None
    except (OSError, ValueError):
        return None
