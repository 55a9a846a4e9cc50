"""host.profile: the platform profile the node was judged against (checks/profiles/detect.py chose
it, or the configuration named it), and whether detection was sure."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Finding
from ..core.registry import CheckContext, check


@check("host.profile", needs=("pci", "nvml", "host"),
       remedy="Pass --profile NAME (clusterdiag profiles list) or set `profile:` in the config "
              "when auto-detection cannot tell the platform; an ambiguous node is judged "
              "against no hardware expectations until then.")
def profile_used(ctx: CheckContext) -> Iterator[Finding]:
    """The platform profile the node was judged against, and whether detection was sure."""
    if ctx.profile_source == "ambiguous":
        yield Finding.warn("node", "platform ambiguous: judged against no hardware expectations",
                           observed=ctx.profile_reason, expected="one matching profile")
    elif ctx.profile_source == "tied":  # the reason names the profiles tied
        shared = ("no hardware expectations" if ctx.profile.name == "generic"
                  else "the base they share")
        yield Finding.warn("node", f"profiles match equally: judged against {shared}",
                           observed=ctx.profile_reason, expected="one most specific profile")
    elif ctx.profile_source == "detected":
        yield Finding.passed("node", "profile detected",
                             observed=f"{ctx.profile.name}: {ctx.profile_reason}")
    else:
        yield Finding.passed("node", "profile set by configuration", observed=ctx.profile.name)
