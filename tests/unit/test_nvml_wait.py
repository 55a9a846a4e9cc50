"""The NVML reader waits on its worker's pipe whatever the pipe's descriptor number: the
agent serving thousands of connections hands out descriptors beyond select()'s 1,024."""

from __future__ import annotations

import os
import resource
import time

import pytest

from clusterdiag.agent.collectors.nvml import PendingNvml
from clusterdiag.agent.model import SourceStats
from clusterdiag.agent.model.gpu import NvmlInfo
from clusterdiag.agent.model.serde import to_jsonable
from clusterdiag.agent.read.worker import fork_worker


def test_the_nvml_reader_waits_on_a_descriptor_above_1024() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    high = 1500
    if hard != resource.RLIM_INFINITY and hard <= high:
        pytest.skip(f"the hard open-file limit {hard} is below fd {high}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, high + 1), hard))
    info = to_jsonable(NvmlInfo(device_count=0))
    try:
        pid, fd = fork_worker(lambda emit: (emit({"t": "system", "data": info}),
                                            emit({"t": "end", "calls": 1})))
        os.dup2(fd, high)
        os.close(fd)
        stats = SourceStats()
        result = PendingNvml(pid=pid, fd=high, started=time.monotonic()).result(
            stats, time.monotonic() + 30)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert stats.status == "ok", stats
    assert stats.calls == 1, stats
    assert result.device_count == 0
    assert not result.errors
