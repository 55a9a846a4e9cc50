"""Site profiles: a platform profile as the site's own YAML file (docs/design.md §3 ``--profile``).

A real fleet is seldom NVIDIA's reference design: OEM boards, RoCE compute fabrics at
200 Gb/s, other NIC counts. A site profile says ``extends: NAME`` (a built-in or another
site profile) and overrides any profile field; without ``extends`` it starts from the
empty profile. Site profiles are every ``*.yaml`` in the config's ``profile_dir``
(``/etc/clusterdiag/profiles``), plus a file named by ``--profile FILE.yaml`` or the
config's ``profile:``; each is named after its file (``mysite.yaml`` is ``mysite``) and may
not take a built-in's name (extend it instead). They are validated as the config is: an
unknown key (with a did-you-mean), a wrong type, a cycle of ``extends`` or an unknown base
is a ConfigError (exit 2) of one line naming the file and the key; ``thresholds:`` (check
id -> parameter -> value, over the check's defaults) are validated against each check's
parameter dataclass as the config's ``checks:`` are; ``qualify:`` (active test id ->
unit, expected, floor, source) against the active tests' declarations
(``checks.profiles.profile.qualify_problem``). Each merged profile
keeps where every value came from, which ``profiles show`` prints.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ...checks.core.index import schemas
from ...checks.profiles.profile import (
    IMEX_MODES,
    Profile,
    builtin_names,
    did_you_mean,
    load_builtin,
    qualify_problem,
)
from ..base.errors import ConfigError
from .config import brief, read_yaml, validate_check_params

LINK_LAYERS = ("InfiniBand", "Ethernet")
TRUST_MODES = ("dscp", "pcp")
# Fields whose value is a mapping: a site's entries are merged over the base's, key by key,
# so overriding one check's threshold keeps the others.
_MERGED = ("qualify", "thresholds")


@dataclass(frozen=True)
class SiteProfile:
    """A merged profile and, per field, where its value came from."""
    profile: Profile
    path: str
    extends: str | None
    origins: dict[str, str]


def _kinds() -> dict[str, tuple[type, ...]]:
    """Each overridable field's accepted YAML types (ints are numbers too)."""
    kinds: dict[str, tuple[type, ...]] = {}
    hints = typing.get_type_hints(Profile)
    for f in fields(Profile):
        hint = hints[f.name]
        args = typing.get_args(hint)
        base = typing.get_origin(hint) or hint
        if base is tuple:
            kinds[f.name] = (list,)
        elif base is dict:
            kinds[f.name] = (dict,)
        elif hint is bool:
            kinds[f.name] = (bool,)
        elif hint is str:
            kinds[f.name] = (str,)
        elif hint is int:  # nvlinks_per_gpu: a count with a default, never null
            kinds[f.name] = (int,)
        elif float in args:
            kinds[f.name] = (int, float, type(None))
        elif int in args:
            kinds[f.name] = (int, type(None))
        else:
            kinds[f.name] = (str, type(None))
    del kinds["name"]  # the file's name
    del kinds["extends"]  # a profile's name, checked against the profiles there are
    return kinds


_TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true/false",
               list: "a list", dict: "a mapping", type(None): "null"}


def _type_problem(key: str, value: Any, kinds: tuple[type, ...]) -> str | None:
    ok = isinstance(value, kinds) and not (isinstance(value, bool) and bool not in kinds)
    if not ok:
        wanted = " or ".join(_TYPE_NAMES[t] for t in kinds if not (t is int and float in kinds))
        return f"must be {wanted}, got {type(value).__name__} {brief(value)}"
    if isinstance(value, list) and not all(isinstance(v, str) for v in value):
        return f"must be a list of strings, got {brief(value)}"
    if isinstance(value, dict) and not all(isinstance(v, dict) for v in value.values()):
        return f"must map names to mappings, got {brief(value)}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
        return f"must not be negative, got {brief(value)}"
    if key == "hca_link_layer" and value is not None and value not in LINK_LAYERS:
        return f"must be {' or '.join(LINK_LAYERS)}, got {brief(value)}"
    if key == "roce_trust" and value is not None and value not in TRUST_MODES:
        return f"must be {' or '.join(TRUST_MODES)}, got {brief(value)}"
    if key == "imex_mode" and value not in IMEX_MODES:
        return f"must be {' or '.join(IMEX_MODES)}, got {brief(value)}"
    if key == "roce_priority" and isinstance(value, int) and value > 7:
        return f"must be a priority 0-7, got {brief(value)}"
    return None


def _read(path: Path) -> dict[str, Any]:
    where = f"profile {path}"
    data = read_yaml(path, where)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: top level must be a mapping")
    kinds = _kinds()
    for key, value in data.items():
        if key == "extends":
            if not isinstance(value, str):
                raise ConfigError(f"{where}: key 'extends' must be a profile name, got "
                                  f"{brief(value)}")
            continue
        if key not in kinds:
            hint = did_you_mean(str(key), [*kinds, "extends"])
            raise ConfigError(f"{where}: unknown key {brief(key)}{hint}")
        if problem := _type_problem(key, value, kinds[key]):
            raise ConfigError(f"{where}: key {key!r} {problem}")
        if key == "thresholds":
            validate_check_params(value, where, schemas(), section="thresholds")
        if key == "qualify" and (problem := qualify_problem(value)):
            raise ConfigError(f"{where}: {problem}")
    return data


def _files(directory: Path, extra: Path | None) -> dict[str, Path]:
    found: dict[str, Path] = {}
    if directory.is_dir():
        try:
            listed = sorted(p for p in directory.iterdir() if p.name.endswith(".yaml"))
        except OSError as exc:
            raise ConfigError(f"profile_dir {directory}: cannot list: "
                              f"{exc.strerror or exc}") from None
        found = {p.name[:-5]: p for p in listed}
    if extra is not None:
        name = extra.name.rsplit(".", 1)[0]
        other = found.get(name)
        if other is not None and other.resolve() != extra.resolve():
            raise ConfigError(f"profile {extra}: the profile {name!r} is also {other}; "
                              "rename one of them")
        found[name] = extra
    for name, path in found.items():
        if name in builtin_names():
            raise ConfigError(f"profile {path}: {name!r} is a built-in profile; name the file "
                              f"otherwise and say 'extends: {name}'")
    return found


def load_site_profiles(directory: Path, extra: Path | None = None) -> dict[str, SiteProfile]:
    """Every site profile of ``directory`` and ``extra``, each merged over its bases."""
    paths = _files(directory, extra)
    raw = {name: _read(path) for name, path in paths.items()}
    merged: dict[str, SiteProfile] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> tuple[Profile, dict[str, str]]:
        if name in merged:
            return merged[name].profile, merged[name].origins
        if name not in raw:
            built = load_builtin(name)
            return built, {f.name: f"built-in {name}" for f in fields(Profile)}
        where = f"profile {paths[name]}"
        data = dict(raw[name])
        base_name = data.pop("extends", None)
        if base_name is None:
            base, origins = Profile(name=name), {f.name: "default" for f in fields(Profile)}
        elif base_name in (*chain, name):
            cycle = " -> ".join((*chain, name, base_name))
            raise ConfigError(f"{where}: key 'extends': a cycle ({cycle})")
        elif base_name not in raw and base_name not in builtin_names():
            hint = did_you_mean(base_name, [*raw, *builtin_names()])
            raise ConfigError(f"{where}: key 'extends': unknown profile {brief(base_name)}{hint}")
        else:
            base, origins = resolve(base_name, (*chain, name))
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key in _MERGED:
                values[key] = {**getattr(base, key), **value}
            else:
                values[key] = tuple(value) if isinstance(value, list) else value
        profile = replace(base, name=name, extends=base_name, **values)
        own = {**origins, "name": str(paths[name]), "extends": str(paths[name]),
               **{k: str(paths[name]) for k in data}}
        merged[name] = SiteProfile(profile, str(paths[name]), base_name, own)
        return profile, own

    for name in raw:
        resolve(name, ())
    return merged
