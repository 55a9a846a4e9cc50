"""What each active-test fault does to a simulated node (the table is in catalog.py): one
part runs at ``factor`` of its healthy rate (sim/bandwidth.py), NCCL falls back to
sockets, or every tool hangs. A node's passive checks see none of these: only traffic
shows them, which is why ``clusterdiag qualify`` exists. Some show only between nodes: a
rail's cable (``cable``: the same-host loopback never leaves the HCA), the rack's spine
uplinks (``uplink``), a tray's multi-node NVLink (``mnnvl``) or its missing IMEX channel.

Others are how the node's tools were built or installed (state/hardware.py): a perftest
without CUDA (the distribution's), an ib_write_bw server slow to open its device, an
all_reduce_perf whose loader cannot find libnccl.so.2, nccl-tests built without MPI."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..state.hardware import SimNode

Apply = Callable[[SimNode, Mapping[str, Any]], None]
DEFAULT_FACTOR = 0.8  # 20 % slow: a fail-slow part that clears every absolute floor
# Parts that are the node's as a whole: its rack's leaf uplinks to the spine, its path into
# the NVL72 rack's NVLink switch trays.
NODE_WIDE = ("uplink", "mnnvl", "network")


def slow(part: str) -> Apply:
    def apply(node: SimNode, fault: Mapping[str, Any]) -> None:
        where = fault["hca"] if part in ("rail", "cable") else \
            0 if part in NODE_WIDE else int(fault["gpu"])
        node.slow[f"{part}:{where}"] = float(fault.get("factor", DEFAULT_FACTOR))
    return apply


def socket_fallback(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.socket_fallback = True


def imex_channel_missing(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.imex_channel = False


# DCGM_FR_PCI_REPLAY_RATE (error 3), the PCIe plugin's (BusGrind) replay check; its message
# format is DCGM's dcgm_errors.h DCGM_FR_PCI_REPLAY_RATE_MSG.
PCIE_REPLAY_WARNING = (3, "Detected more than {limit} PCIe replays per minute for GPU {gpu} : "
                          "{count}")


def dcgm_plugin_fail(node: SimNode, fault: Mapping[str, Any]) -> None:
    """dcgmi diag's pcie test fails on GPU ``gpu`` with DCGM's replay-rate warning."""
    gpu = int(fault["gpu"])
    error_id, text = PCIE_REPLAY_WARNING
    node.dcgm_failing[("pcie", gpu)] = (error_id, text.format(limit=8, gpu=gpu, count=412))


# An MNUB [E] line's message as the runner keeps it (the text after ``T:N``): one of DCGM's
# own test lines (modules/mndiag/tests/MnDiagMpiMnubergemmRunnerTests.cpp:337).
MNUBERGEMM_ERROR = "CUDA Error : cudaStreamQuery returned an illegal memory access was encountered"


def mndiag_gpu_error(node: SimNode, fault: Mapping[str, Any]) -> None:
    """mnubergemm, under ``dcgmi mndiag``, prints an error line for GPU ``gpu`` of the tray:
    only the rack's multi-node diagnostic sees it."""
    node.mndiag_errors[int(fault["gpu"])] = MNUBERGEMM_ERROR


def tool_hang(node: SimNode, fault: Mapping[str, Any]) -> None:
    node.tools_hang = True


def perftest_no_cuda(node: SimNode, fault: Mapping[str, Any]) -> None:
    """Debian's/Ubuntu's perftest 4.5: ``--use_cuda`` is not an option of it."""
    node.perftest_cuda = False


DEFAULT_OPEN_S = 2.0  # far past the 0.2 s a caller that does not wait gives it


def perftest_slow_start(node: SimNode, fault: Mapping[str, Any]) -> None:
    """The ib_write_bw server listens ``delay_s`` after it starts (the device's open,
    ssh or srun start-up): a client that does not wait or retry is refused."""
    node.perftest_open_s = float(fault.get("delay_s", DEFAULT_OPEN_S))


def nccl_library_unloadable(node: SimNode, fault: Mapping[str, Any]) -> None:
    """NCCL installed off the loader's path of a remote shell (a pip wheel, /usr/local):
    all_reduce_perf exits 127 before it prints anything."""
    node.missing_libraries.add("libnccl.so.2")


def nccl_tests_no_mpi(node: SimNode, fault: Mapping[str, Any]) -> None:
    """nccl-tests built without MPI=1 (its default): each task of a multi-node job runs
    alone and prints its own node's all-reduce."""
    node.nccl_tests_mpi = False


def delay_problem(fault: Mapping[str, Any]) -> str | None:
    """Why a ``delay_s`` key is unusable: it must be a number of seconds from 0 to 60."""
    if "delay_s" not in fault:
        return None
    value = fault["delay_s"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 60:
        return f"delay_s {value!r} is not a number of seconds from 0 to 60"
    return None


def factor_problem(fault: Mapping[str, Any]) -> str | None:
    """Why a ``factor`` key is unusable: it must be a number in (0, 1]."""
    if "factor" not in fault:
        return None
    value = fault["factor"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        return f"factor {value!r} is not a number in (0, 1]"
    return None
