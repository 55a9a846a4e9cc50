"""The XID listener: NVML critical-error events between collections, in a forked process.

``nvmlEventSetWait`` blocks inside the driver; on a wedged GPU it may never return. So it
runs in its own process (forked before the agent starts threads, every inherited
descriptor but its pipe closed, like the NVML collector) that streams one JSON line per
event. The agent reads the pipe from its event loop; if the listener dies it is restarted
after a pause, and if it hangs nothing else waits on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..read.sources import SourceEnv
from ..read.worker import fork_worker, stop_worker

if TYPE_CHECKING:
    from ..collectors.nvml_api import NvmlApi

_WAIT_MS = 1000  # how long one wait blocks: also how soon the listener notices an orphaning
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError


def listen(nv: NvmlApi, emit: Callable[[dict[str, Any]], None], parent: int) -> None:
    """Register every GPU for XID events and report each one until the parent is gone."""
    nv.nvmlInit()
    event_set = nv.nvmlEventSetCreate()
    uuids: dict[int, str | None] = {}
    for index in range(nv.nvmlDeviceGetCount()):
        try:
            handle = nv.nvmlDeviceGetHandleByIndex(index)
            supported = nv.nvmlDeviceGetSupportedEventTypes(handle)
            if not supported & XID_EVENT:
                emit({"t": "unsupported", "gpu": index})
                continue
            nv.nvmlDeviceRegisterEvents(handle, XID_EVENT, event_set)
            uuids[index] = _text(nv.nvmlDeviceGetUUID(handle))
        except nv.NVMLError as exc:
            emit({"t": "unsupported", "gpu": index, "error": str(exc)})
    emit({"t": "ready", "gpus": sorted(uuids)})
    while os.getppid() == parent:
        try:
            data = nv.nvmlEventSetWait_v2(event_set, _WAIT_MS)
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) == nv.NVML_ERROR_TIMEOUT:
                continue
            emit({"t": "error", "error": str(exc)})
            time.sleep(1.0)
            continue
        if not int(data.eventType) & XID_EVENT:
            continue
        try:
            gpu: int | None = int(nv.nvmlDeviceGetIndex(data.device))
        except nv.NVMLError:
            gpu = None
        emit({"t": "xid", "xid": int(data.eventData), "gpu_index": gpu,
              "gpu_uuid": uuids.get(gpu) if gpu is not None else None, "time": time.time()})


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class Listener:
    """A running listener process: ``fd`` yields its JSON lines, ``stop`` ends it."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid, self.fd = pid, fd
        self._buffer = b""

    def read(self) -> list[dict[str, Any]] | None:
        """The complete messages available now; None at end of stream (it exited)."""
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return []
        if not chunk:
            return None
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        messages = []
        for line in lines:
            with contextlib.suppress(ValueError):
                messages.append(json.loads(line))
        return messages

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        stop_worker(self.pid, kill=True)


def start(env: SourceEnv) -> Listener:
    module = env.nvml()
    parent = os.getpid()
    pid, read_fd = fork_worker(lambda emit: listen(module, emit, parent))
    os.set_blocking(read_fd, False)
    return Listener(pid, read_fd)
