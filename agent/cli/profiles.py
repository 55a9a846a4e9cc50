"""``clusterdiag profiles list|show NAME``: the platform profiles."""

from __future__ import annotations

import click

from ..errors import UsageError


@click.group("profiles")
def profiles_group() -> None:
    """Platform profiles."""


@profiles_group.command("list")
def profiles_list() -> None:
    from ...checks.profile import load_profile, profile_names

    for name in profile_names():
        prof = load_profile(name)
        flag = " (provisional)" if prof.provisional else ""
        click.echo(f"{name:16} {prof.description}{flag}")


@profiles_group.command("show")
@click.argument("name")
def profiles_show(name: str) -> None:
    import yaml

    from ...checks.profile import UnknownProfileError, load_profile

    try:
        prof = load_profile(name)
    except UnknownProfileError as exc:
        raise UsageError(str(exc)) from None
    click.echo(yaml.safe_dump(prof.to_dict(), sort_keys=False).rstrip())


COMMANDS = (profiles_group,)
