"""The kernel log source: a file given with --kernel-log, else the live /dev/kmsg.

Both are read under the source's deadline and, unless ``env.kernel_log_every_line`` asks
for every matching line (``snapshot --kernel-log``, docs/design.md §8), keep only the events of the
look-back window.
"""

from __future__ import annotations

import time

from ..model import SourceStats
from ..model.kernel import KernelLog
from ..read.sources import SourceEnv
from .kernel_log import read_file, read_kmsg

# Stop reading this long before the source's deadline, so the thread hands back what it
# read instead of being abandoned (and reported as a timeout) while it parses on.
_MARGIN_S = 0.3


def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> KernelLog:
    deadline -= _MARGIN_S
    if env.kernel_log_file is not None:
        lookback = None if env.kernel_log_every_line else env.kernel_lookback_s
        log = read_file(env.kernel_log_file, now=time.time(), lookback_s=lookback,
                        deadline=deadline)
    else:
        log = read_kmsg(env.root, env.kernel_lookback_s, now=time.time(), deadline=deadline)
    stats.files_read += 1
    return log
