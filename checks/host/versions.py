"""host.versions: the node runs the versions its profile expects — the NVIDIA driver, the
GPUs' VBIOS, the compute NICs' firmware — as a captured site profile records them
(``clusterdiag profiles capture``).

A warn, never a fail: a node part-way through a rolling upgrade is not broken, and the
operator who pins a version hard does so with the checks that fail on it (ib.firmware's
``expected``). Cross-node drift is cluster.versions'; this is one node against its site.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..core.common import NODE, gpu_component, nvml_down
from ..core.finding import Action, Finding
from ..core.registry import CheckContext, check


def _judge(component: str, what: str, seen: str, expected: tuple[str, ...]) -> Finding:
    if seen in expected:
        return Finding.passed(component, f"{what} as the profile expects", seen, list(expected))
    return Finding.warn(component, f"{what} {seen}, the profile expects "
                                   f"{' or '.join(expected)}", seen, list(expected),
                        Action.FIX_CONFIG)


@check("host.versions", needs=("nvml", "infiniband"),
       remedy="Bring the node to the site's versions (the driver package, nvflash for the "
              "VBIOS, mlxfwmanager for the NIC firmware) or, after a deliberate upgrade of "
              "the fleet, capture the profile again (clusterdiag profiles capture).",
       actions=(Action.FIX_CONFIG,))
def versions(ctx: CheckContext) -> Iterator[Finding]:
    """Driver, VBIOS and compute NIC firmware among the profile's ``driver_versions``,
    ``vbios_versions`` and ``nic_firmware``; a version not read is skipped saying why."""
    profile, snap = ctx.profile, ctx.snapshot
    judged = False
    nvml = snap.nvml
    if profile.driver_versions or profile.vbios_versions:
        down = nvml_down(nvml) or ("NVML not read" if nvml is None else None)
        if down is not None:
            judged = True
            yield Finding.skip(NODE, f"driver and VBIOS versions not read: {down}")
        elif nvml is not None:
            if profile.driver_versions and nvml.driver_version:
                judged = True
                yield _judge(NODE, "NVIDIA driver", nvml.driver_version,
                             profile.driver_versions)
            for gpu in nvml.gpus if profile.vbios_versions else ():
                if gpu.vbios:
                    judged = True
                    yield _judge(gpu_component(gpu), "VBIOS", gpu.vbios, profile.vbios_versions)
    if profile.nic_firmware:
        for dev in snap.infiniband or []:
            if dev.role == "compute" and dev.fw_ver:
                judged = True
                yield _judge(dev.name, "NIC firmware", dev.fw_ver, profile.nic_firmware)
    if not judged:
        yield Finding.skip(NODE, "the profile expects no versions (a captured site profile "
                                 "does)")
