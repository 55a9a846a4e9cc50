"""NCCL readiness: the library, its settings, and (at ``--level full``) a real all-reduce.

The host facts NCCL depends on (GPUDirect RDMA, ACS, IOMMU, limits, GPU-NIC placement)
are in nccl_host.py; the settings validation itself in nccl_env.py.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..agent.model import Snapshot
from ..agent.model.nccl import NcclInfo
from ..agent.model.pci import MELLANOX_VENDOR
from .finding import Action, Finding
from .nccl_env import validate
from .registry import CheckContext, check

NODE = "node"


def nccl_info(snap: Snapshot) -> NcclInfo:
    assert snap.nccl is not None  # the runner judges only checks whose sources arrived
    return snap.nccl


def rdma_present(snap: Snapshot) -> bool:
    """An RDMA port NCCL would see, or at least a Mellanox network function on the bus."""
    if snap.nccl is not None and snap.nccl.ports:
        return True
    return any(d.vendor == MELLANOX_VENDOR and d.pci_class >> 16 == 0x02 for d in snap.pci or [])


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdecimal())


@check("nccl.library", needs=("nccl",), params={"require_host": False, "min_version": None},
       remedy="Install NCCL on the host (libnccl2 package, or the nvidia-nccl-cu12/-cu13 "
              "wheel) or set require_host: false when NCCL ships in the job containers; a copy "
              "that does not load usually misses a dependency (ldd libnccl.so.2).",
       actions=(Action.FIX_CONFIG,))
def library(ctx: CheckContext) -> Iterator[Finding]:
    """libnccl.so.2 where a job's dynamic linker or Python would find it, and its version."""
    info = nccl_info(ctx.snapshot)
    required = bool(ctx.params.get("require_host"))
    copies = {lib.path: lib.version or lib.error for lib in info.libraries}
    if not info.libraries:
        if required:
            yield Finding.fail(NODE, "libnccl.so.2 not found on the host", None,
                               "libnccl.so.2 on the linker path or in a Python wheel",
                               Action.FIX_CONFIG)
        else:
            yield Finding.skip(NODE, "no libnccl.so.2 on the host (NCCL may live in the job "
                               "containers; require_host: true makes this a failure)")
        return
    first = info.libraries[0]
    if first.version is None:
        status = Finding.fail if required else Finding.warn
        yield status(NODE, "libnccl.so.2 found but its version could not be read", copies,
                     "a loadable library", Action.FIX_CONFIG)
        return
    wanted = ctx.params.get("min_version")
    if wanted and _version_tuple(first.version) < _version_tuple(str(wanted)):
        yield Finding.fail(NODE, "NCCL on the host is older than required", first.version,
                           f">= {wanted}", Action.FIX_CONFIG)
        return
    yield Finding.passed(NODE, f"NCCL {first.version} ({first.found_by})", copies)


@check("nccl.env", needs=("nccl", "pci"), params={"env_file": None},
       remedy="Fix the setting where it is made (shown in observed: /etc/nccl.conf, the site "
              "env file, or the job environment). Prefer '=mlx5_0,...' exact HCA lists, name "
              "interfaces that are up, and leave debugging switches (NCCL_IB_DISABLE, "
              "NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_NET=Socket) unset in production.",
       actions=(Action.FIX_CONFIG, Action.INVESTIGATE))
def env(ctx: CheckContext) -> Iterator[Finding]:
    """NCCL settings name HCAs, ports and interfaces that exist and are up; no crippling ones.

    A prolog or the agent has no job environment: it judges /etc/nccl.conf and the site
    env file (env_file). ``run`` also judges its own environment, which overrides them.
    """
    info = nccl_info(ctx.snapshot)
    for path, why in sorted(info.file_errors.items()):
        yield Finding.warn(NODE, "NCCL settings file could not be read", {path: why}, None,
                           Action.FIX_CONFIG)
    settings: dict[str, str] = {}
    sources: dict[str, str] = {}
    for path, values in info.files.items():
        settings.update(values)
        sources.update(dict.fromkeys(values, path))
    if ctx.mode == "run":
        settings.update(info.environ)
        sources.update(dict.fromkeys(info.environ, "environment"))
    findings = list(validate(info, settings, rdma_present(ctx.snapshot),
                             ctx.profile.gpu_nic_distance))
    yield from findings
    if not findings:
        shown = {k: f"{v} ({sources[k]})" for k, v in sorted(settings.items())}
        yield Finding.passed(NODE, "NCCL settings are consistent with this node" if settings
                             else "no NCCL settings: NCCL defaults apply", shown or None)


@check("nccl.allreduce", needs=("allreduce",), active=True,
       params={"program": "all_reduce_perf", "args": None, "min_busbw_fraction": 0.9},
       remedy="Compare with nvidia-smi topo -m and nvlink.* findings; a low bus bandwidth on "
              "one node with healthy links usually means a GPU clocked down (gpu.clock_events) "
              "or a PCIe/NVLink fault. Wrong results mean bad GPU memory or links: drain it.",
       actions=(Action.INVESTIGATE, Action.DRAIN))
def allreduce(ctx: CheckContext) -> Iterator[Finding]:
    """nccl-tests all_reduce_perf on every local GPU: bus bandwidth and correct results."""
    run = ctx.snapshot.allreduce
    if run is None:
        yield Finding.skip(NODE, "all_reduce_perf was not run")
        return
    if run.returncode is None:
        if (run.error or "").endswith("not found"):
            yield Finding.skip(NODE, "nccl-tests all_reduce_perf is not installed on this node")
        else:
            yield Finding.error(NODE, f"all_reduce_perf did not finish: {run.error}")
        return
    if run.wrong:
        yield Finding.fail(NODE, "all_reduce_perf returned wrong results", run.wrong, 0,
                           Action.DRAIN)
        return
    if run.returncode != 0 or run.busbw_gbps is None:
        yield Finding.fail(NODE, "all_reduce_perf failed", run.output_tail or run.returncode,
                           "exit status 0 and a bandwidth table", Action.INVESTIGATE)
        return
    expected = ctx.profile.allreduce_busbw_gbps
    observed = {"busbw_gbps": run.busbw_gbps, "size_bytes": run.size_bytes,
                "avg_busbw_gbps": run.avg_busbw_gbps}
    if expected is None:
        yield Finding.passed(NODE, "all_reduce_perf ran (no expected bandwidth in the profile)",
                             observed)
        return
    floor = expected * float(ctx.params.get("min_busbw_fraction") or 1.0)
    if run.busbw_gbps < floor:
        yield Finding.fail(NODE, "all-reduce bus bandwidth below the profile's expectation",
                           observed, f">= {floor:g} GB/s", Action.INVESTIGATE)
    else:
        yield Finding.passed(NODE, "all-reduce bus bandwidth as expected", observed,
                             f">= {floor:g} GB/s")
