"""nccl.env: the NCCL_* settings a job gets, validated against this node."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, nccl_info, rdma_present
from .settings import validate


@parameters
class EnvParams(Params):
    env_file: str | None = param(
        None, doc="the site's NCCL env file (KEY=value lines) judged beside /etc/nccl.conf; "
        "null: none")


@check("nccl.env", needs=("nccl", "pci"), params=EnvParams,
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
