"""The kernel log source: a file given with --kernel-log, else the live /dev/kmsg."""

from __future__ import annotations

import time

from ..kernel_log import read_file, read_kmsg
from ..model import SourceStats
from ..model.kernel import KernelLog
from ..sources import SourceEnv


def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> KernelLog:
    if env.kernel_log_file is not None:
        log = read_file(env.kernel_log_file, now=time.time())
    else:
        log = read_kmsg(env.root, env.kernel_lookback_s, now=time.time())
    stats.files_read += 1
    return log
