"""The generated files of checks/catalogs/: the manifest (the check catalog as plain data,
read by ``index.py`` to plan a run without importing the families; and the active tests of
``clusterdiag qualify``, read by the config, the profiles and ``checks list|explain``, which
may not import the qualify family) and the built-in profiles as YAML reads them
(``profile_data.py``, so that loading one needs no PyYAML).

After adding or changing a check or a profile file, run ``python -m dev.regenerate`` from
the repository's root, which writes them with the other generated files
(``tests/unit/test_check_manifest.py`` fails, naming that command, while either is stale).
"""

from __future__ import annotations

import importlib
import pprint
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..profiles.profile import read_builtin_files
from . import index
from .registry import REGISTRY, CheckSpec

MANIFEST = "manifest.py"
PROFILE_DATA = "profile_data.py"
COMMAND = "python -m dev.regenerate"


def _invocation(invocation: Any) -> dict[str, Any]:
    return {"run": invocation.name, "program": invocation.program, "parser": invocation.parser,
            "argv": tuple(invocation.argv), "env": tuple(invocation.env),
            "deadline_s": invocation.deadline_s, "install": invocation.install,
            "source": invocation.source}


def active_fields(active: Any) -> dict[str, dict[str, Any]]:
    """Each active test of ``active`` (checks/qualify/active.py) as plain data: what the
    config's ``qualify:`` keys, a profile's ``qualify:`` entries and ``checks explain`` are
    checked against."""
    out = {}
    for test in active.ACTIVE_TESTS.values():
        fallback = active.FALLBACKS.get(test.id)
        judging = test.judging
        out[test.id] = {
            "summary": test.summary, "scope": test.scope.value,
            "invocation": _invocation(test.invocation),
            "fallback": None if fallback is None else _invocation(fallback),
            "selector": test.selector, "figure": test.figure,
            "alternates": tuple(test.alternates), "unit": test.unit, "counts": test.counts,
            "action": test.action.value, "fault": test.fault,
            "judging": {"floor": judging.floor, "peers": judging.peers,
                        "repeat": judging.repeat, "expected": judging.expected},
            "needs_rails": test.needs_rails, "min_nodes": test.min_nodes}
    return out


def render(registry: Mapping[str, CheckSpec],
           active: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The manifest's text for ``registry`` (every family imported) and the active tests."""
    table = {check_id: index.fields_of(registry[check_id]) for check_id in sorted(registry)}
    body = pprint.pformat(table, width=90, sort_dicts=False)
    tests = pprint.pformat(dict(active or {}), width=90, sort_dicts=False)
    return ('"""The check catalog as plain data, for planning a run without importing it\n'
            "(checks/core/index.py), and the active tests of clusterdiag qualify\n"
            "(checks/qualify/active.py) by test id, in the order a qualification runs them.\n"
            "Generated: do not edit; after changing a check or an active test, run\n"
            f'``{COMMAND}``."""\n\nfrom __future__ import annotations\n\n'
            "TYPE_CHECKING = False  # typing stays off the prolog's path\n"
            "if TYPE_CHECKING:\n    from typing import Any\n\n"
            f"CHECKS = {body}\n\nACTIVE: dict[str, dict[str, Any]] = {tests}\n")


def render_profiles(profiles: Mapping[str, Any]) -> str:
    """``profile_data.py``'s text for the built-in profile files as YAML reads them."""
    body = pprint.pformat(dict(profiles), width=90, sort_dicts=False)
    return ('"""The built-in profiles (checks/profiles/*.yaml) as YAML reads them, so that\n'
            "loading one needs no PyYAML (checks/profiles/profile.py). Generated: do not edit;\n"
            f'after changing a profile file, run ``{COMMAND}``."""\n\nPROFILES = {body}\n')


def generated() -> dict[Path, str]:
    """Each generated file (in checks/catalogs/) and the text it must have."""
    index.load_all()
    # Imported by name, as load_all imports the families: the qualify family stands on
    # this layer, and the manifest is where the layers below it read its declarations.
    active = importlib.import_module(f"{index.PACKAGE}.qualify.active")
    catalogs = Path(__file__).resolve().parents[1] / "catalogs"
    return {catalogs / MANIFEST: render(REGISTRY, active_fields(active)),
            catalogs / PROFILE_DATA: render_profiles(read_builtin_files())}
