"""host.kernel_cmdline: the kernel parameters the config requires or forbids, as the
kernel applies them."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, host_info


def _param_name(name: str) -> str:
    """The kernel treats ``-`` and ``_`` in parameter names alike (``parameq``)."""
    return name.replace("-", "_")


def effective_cmdline(words: list[str]) -> dict[str, str | None]:
    """Kernel parameter name -> its last value (None for a bare flag).

    Words after ``--`` go to init, not the kernel. For an ordinary parameter the last
    occurrence wins, since each one is applied in order.
    """
    params: dict[str, str | None] = {}
    for word in words:
        if word == "--":
            break
        name, sep, value = word.partition("=")
        params[_param_name(name)] = value if sep else None
    return params


@parameters
class CmdlineParams(Params):
    required: tuple[str, ...] = param(
        (), doc="kernel parameters that must be set: name, or name=value")
    forbidden: tuple[str, ...] = param(
        (), doc="kernel parameters that must not be set: name, or name=value")


@check("host.kernel_cmdline", needs=("host",), params=CmdlineParams,
       remedy="Fix the boot loader configuration (GRUB_CMDLINE_LINUX, then update-grub or "
              "grub2-mkconfig) and reboot.",
       actions=(Action.FIX_CONFIG,))
def kernel_cmdline(ctx: CheckContext) -> Iterator[Finding]:
    """``required`` and ``forbidden`` kernel parameters (``name`` or ``name=value``)."""
    host = host_info(ctx)
    if isinstance(host, Finding):
        yield host
        return
    configured = CmdlineParams.of(ctx)
    required, forbidden = configured.required, configured.forbidden
    if not required and not forbidden:
        yield Finding.skip(NODE, "no kernel parameters configured")
        return
    if "cmdline" in host.unknown:
        yield Finding.error(NODE, "kernel command line unreadable", host.unknown["cmdline"])
        return
    params = effective_cmdline(host.cmdline)
    problems = 0
    for entry, wanted in [(e, True) for e in required] + [(e, False) for e in forbidden]:
        name, sep, value = str(entry).partition("=")
        name = _param_name(name)
        present = name in params and (not sep or params[name] == value)
        if present == wanted:
            continue
        problems += 1
        seen = None if name not in params else (
            name if params[name] is None else f"{name}={params[name]}")
        if wanted:
            yield Finding.fail(NODE, f"required kernel parameter missing: {entry}", seen,
                               entry, Action.FIX_CONFIG)
        else:
            yield Finding.fail(NODE, f"forbidden kernel parameter set: {entry}", seen,
                               f"not {entry}", Action.FIX_CONFIG)
    if not problems:
        yield Finding.passed(NODE, "kernel parameters as configured", host.cmdline,
                             {"required": required, "forbidden": forbidden})
