"""Which platform profile a node is, from evidence in the snapshot — or ``generic``.

Guessing wrong is worse than not guessing: a DGX with a GPU missing must not be judged
as some 7-GPU platform, and a GH200 is not an H200. Only an unambiguous match wins.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ..agent.model import Snapshot
from .finding import Finding
from .profile import Profile, load_profile, profile_names
from .registry import CheckContext, check


@dataclass(frozen=True)
class Detection:
    name: str
    reason: str
    confident: bool


def detect_profile(snap: Snapshot) -> Detection:
    pci_gpus = [d for d in snap.pci or [] if d.is_nvidia_gpu]
    nvswitches = [d for d in snap.pci or [] if d.is_nvswitch]
    nvml_gpus = snap.nvml.gpus if snap.nvml else []
    if not pci_gpus and not nvml_gpus:
        return Detection("generic", "no NVIDIA GPU on this node", True)
    models = {g.name for g in nvml_gpus if g.name}
    if len(models) != 1:
        why = "NVML named no GPU model" if not models else f"mixed GPU models {sorted(models)}"
        return Detection("generic", why, False)
    (model,) = models
    candidates = [load_profile(n) for n in profile_names()
                  if model in load_profile(n).gpu_models]
    if not candidates:
        return Detection("generic", f"no profile for GPU model {model!r}", False)
    count_nvml, count_pci = len(nvml_gpus), len(pci_gpus)
    product = (snap.host.dmi_product_name if snap.host else None) or ""
    by_dmi = [p for p in candidates if _dmi_names(p, product)]
    if len(by_dmi) == 1:
        # The chassis says what it is, whatever number of GPUs still answers: a DGX H100
        # with a GPU off the bus is a DGX H100 short of a GPU (gpu.count fails), not a
        # 7-GPU platform judged against nothing.
        return Detection(by_dmi[0].name, f"DMI product {product!r}, {count_nvml} x {model}",
                         True)
    if snap.pci is not None and count_pci != count_nvml:
        return Detection("generic", f"{count_pci} GPUs on PCI but {count_nvml} in NVML", False)
    fits = [p for p in candidates if p.gpu_count == count_nvml]
    if snap.pci is not None:
        fits = [p for p in fits if p.nvswitch == bool(nvswitches) or p.nvl72]
    if len(fits) != 1:
        names = [p.name for p in fits] or [p.name for p in candidates]
        return Detection("generic", f"{count_nvml} x {model} matches "
                         f"{'none' if not fits else 'several'} of {names}", False)
    return Detection(fits[0].name, f"{count_nvml} x {model}"
                     f"{', NVSwitch on PCI' if nvswitches else ''}", True)


def _dmi_names(profile: Profile, product: str) -> bool:
    return bool(product) and any(d.lower() in product.lower() for d in profile.dmi_products)


@check("host.profile", needs=("pci", "nvml", "host"),
       remedy="Pass --profile NAME (clusterdiag profiles list) or set `profile:` in the config "
              "when auto-detection cannot tell the platform; an ambiguous node is judged "
              "against no hardware expectations until then.")
def profile_used(ctx: CheckContext) -> Iterator[Finding]:
    """The platform profile the node was judged against, and whether detection was sure."""
    if ctx.profile_source == "ambiguous":
        yield Finding.warn("node", "platform ambiguous: judged against no hardware expectations",
                           observed=ctx.profile_reason, expected="one matching profile")
    elif ctx.profile_source == "detected":
        yield Finding.passed("node", "profile detected",
                             observed=f"{ctx.profile.name}: {ctx.profile_reason}")
    else:
        yield Finding.passed("node", "profile set by configuration", observed=ctx.profile.name)
