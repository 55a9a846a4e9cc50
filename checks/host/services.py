"""host.services: the systemd units the config requires are active."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, host_info


@parameters
class ServicesParams(Params):
    required: tuple[str, ...] = param((), doc="the systemd units that must be active")


@check("host.services", needs=("host",), params=ServicesParams,
       remedy="Start the unit (systemctl start UNIT) and read why it stopped "
              "(systemctl status UNIT, journalctl -u UNIT).",
       actions=(Action.FIX_CONFIG, Action.INVESTIGATE))
def services(ctx: CheckContext) -> Iterator[Finding]:
    """Every ``required`` systemd unit is active (a unit still starting warns)."""
    host = host_info(ctx)
    required = ServicesParams.of(ctx).required
    if isinstance(host, Finding):
        yield host
        return
    if not required:
        yield Finding.skip(NODE, "no required services configured")
        return
    if not host.has_systemd:
        yield Finding.skip(NODE, "host does not run systemd")
        return
    states = {s.name: s for s in host.services}
    for name in required:
        state = states.get(name)
        observed = state and f"{state.active}/{state.sub}"
        if state is None:
            yield Finding.error(name, "service state was not collected", None)
        elif state.error is not None:
            yield Finding.error(name, "systemctl did not answer", state.error)
        elif state.load == "not-found":
            yield Finding.fail(name, "required service not installed", state.load, "loaded",
                               Action.FIX_CONFIG)
        elif state.active in ("active", "reloading"):
            yield Finding.passed(name, "required service active", observed, "active")
        elif state.active == "activating":
            yield Finding.warn(name, "required service still starting", observed, "active")
        else:
            yield Finding.fail(name, "required service not active", observed, "active",
                               Action.FIX_CONFIG)
