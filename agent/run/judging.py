"""Judging one check on a snapshot: its parameters bound, NVML being down and missing
sources answered for it, and a check that raised turned into an ``error`` finding. The
runner and the prolog's lean re-run (``lean``) judge through here, so a check reads the
same whichever path ran it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...checks.core import index
from ...checks.core.common import nvml_down
from ...checks.core.finding import Finding
from .collect import SOURCES, one_line

if TYPE_CHECKING:
    from ...checks.core.params import Params
    from ...checks.core.registry import CheckContext, CheckSpec
    from ...checks.profiles.profile import Profile
    from ..settings.config import Config


def judge(spec: CheckSpec, ctx: CheckContext) -> list[Finding]:
    down = nvml_down(ctx.snapshot.nvml) if "nvml" in spec.needs else None
    if down and spec.id not in index.NVML_DOWN_JUDGES:
        return [index.nvml_down_skip(spec.id, down)]
    missing = [n for n in spec.needs if n in SOURCES and getattr(ctx.snapshot, n) is None]
    never = [n for n in missing if n not in ctx.snapshot.sources]
    if never:
        # Only a saved snapshot lacks a source entirely: it was taken without (or before)
        # that source, which says nothing about the node.
        return [Finding.skip("node", f"the snapshot has no {', '.join(never)} data").replace(
            check=spec.id)]
    if missing:
        why = "; ".join(f"{n}: {ctx.snapshot.sources[n].error or ctx.snapshot.sources[n].status}"
                        for n in missing if n in ctx.snapshot.sources)
        return [Finding.error("node", f"source not collected ({why or 'skipped'})").replace(
            check=spec.id)]
    try:
        findings = list(spec.func(ctx))
    except Exception as exc:  # noqa: BLE001 - a broken check is a finding, not a crash
        return [Finding.error("node", f"check raised {one_line(exc)}").replace(check=spec.id)]
    if not findings:
        findings = [Finding.error("node", "check produced no finding")]
    return [f.replace(check=spec.id) for f in findings]


def bound_params(spec: CheckSpec, config: Config, profile: Profile) -> Params:
    """The parameters ``spec`` judges with, bound into its dataclass: its defaults, under
    the profile's ``thresholds``, under the config's ``checks.<id>`` (both validated when
    loaded against the same schema). ParamsError when they do not fit."""
    return spec.bind(config.check_params(spec.id, spec.params, profile.thresholds.get(spec.id)))
