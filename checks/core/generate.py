"""The generated files of checks/catalogs/: the manifest (the check catalog as plain data,
read by ``index.py`` to plan a run without importing the families) and the built-in
profiles as YAML reads them (``profile_data.py``, so that loading one needs no PyYAML).

After adding or changing a check or a profile file, run ``python -m dev.regenerate`` from
the repository's root, which writes them with the other generated files
(``tests/unit/test_check_manifest.py`` fails, naming that command, while either is stale).
"""

from __future__ import annotations

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


def render(registry: Mapping[str, CheckSpec]) -> str:
    """The manifest's text for ``registry`` (every family imported)."""
    table = {check_id: index.fields_of(registry[check_id]) for check_id in sorted(registry)}
    body = pprint.pformat(table, width=90, sort_dicts=False)
    return ('"""The check catalog as plain data, for planning a run without importing it\n'
            "(checks/core/index.py). Generated from the registry: do not edit; after changing\n"
            f'a check, run ``{COMMAND}``."""\n\nCHECKS = {body}\n')


def render_profiles(profiles: Mapping[str, Any]) -> str:
    """``profile_data.py``'s text for the built-in profile files as YAML reads them."""
    body = pprint.pformat(dict(profiles), width=90, sort_dicts=False)
    return ('"""The built-in profiles (checks/profiles/*.yaml) as YAML reads them, so that\n'
            "loading one needs no PyYAML (checks/profiles/profile.py). Generated: do not edit;\n"
            f'after changing a profile file, run ``{COMMAND}``."""\n\nPROFILES = {body}\n')


def generated() -> dict[Path, str]:
    """Each generated file (in checks/catalogs/) and the text it must have."""
    index.load_all()
    catalogs = Path(__file__).resolve().parents[1] / "catalogs"
    return {catalogs / MANIFEST: render(REGISTRY),
            catalogs / PROFILE_DATA: render_profiles(read_builtin_files())}
