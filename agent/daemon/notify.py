"""sd_notify over ``$NOTIFY_SOCKET`` in a few lines of socket code, so the agent needs no
libsystemd: READY once the first report exists, WATCHDOG from the main loop, STOPPING."""

from __future__ import annotations

import os
import socket


class Notifier:
    """Reads and unsets NOTIFY_SOCKET at start so no child (the NVML worker, a command we
    run) can talk to systemd in our name; without it every call is a no-op."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self.address = env.pop("NOTIFY_SOCKET", None)
        usec = env.pop("WATCHDOG_USEC", None)
        pid = env.pop("WATCHDOG_PID", None)
        mine = pid is None or pid == str(os.getpid())
        self.watchdog_s = int(usec) / 1e6 if usec and usec.isdigit() and mine else None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def send(self, *fields: str) -> bool:
        if not self.address:
            return False
        address = self.address
        if address.startswith("@"):  # abstract namespace
            address = "\0" + address[1:]
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(address)
                sock.sendall("\n".join(fields).encode())
        except OSError:
            return False
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1")
