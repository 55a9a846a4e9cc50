"""A check's parameters: one frozen dataclass per check, the one place that says each
parameter's default, type, range and meaning.

    @parameters
    class EccVolatileParams(Params):
        max_volatile: int = param(0, ge=0, doc="uncorrected errors allowed (DCGM: none)")

    @check("gpu.ecc_uncorrected", params=EccVolatileParams, ...)
    def ecc_uncorrected(ctx: CheckContext) -> Iterator[Finding]:
        limit = EccVolatileParams.of(ctx).max_volatile  # an int, checked when loaded

Everything else is derived from the class: the defaults a config is merged over, and the
schema (``schema_of``) that the generated manifest carries as plain literals, so that the
config and the site profiles' ``thresholds:`` are validated without importing a check
family (agent/settings/config.py ``param_problem``). A type in the schema is a tuple of the
alternatives a value may take:

- ``"bool"``, ``"int"``, ``"number"`` (an int or a float), ``"str"``, ``"null"`` (the
  annotation says ``| None``), ``"any"`` (only for a mapping's values in nested tables);
- ``{"list": alternatives}`` for ``tuple[X, ...]`` (a YAML list; bound as a tuple);
- ``{"map": alternatives, "key": "str" | "int"}`` for ``Mapping[K, V]``: a YAML mapping
  whose keys are bound as K (``"int"`` keys are codes such as Xids, written ``48:`` or
  ``"48":``; ``"str"`` keys may be written as numbers, ``4:`` for PCIe Gen4).

Beside ``"type"``, a parameter's schema may say ``"ge"``/``"le"`` (bounds that every number
in the value must keep), ``"len"`` (how many items every list in the value has: a
``[warn, fail]`` pair) and ``"choices"`` (a ``Literal``'s values).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import (
    Any,
    Literal,
    Protocol,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from ...agent.base.plain import plain_copy
from ...agent.model.record import (
    MISSING,
    RecordField,
    dataclass_transform,
    field,
    fields,
    is_frozen,
    is_record,
    record,
)

P = TypeVar("P", bound="Params")


class Judged(Protocol):
    """What a check judges with (registry.CheckContext): its bound parameters."""

    @property
    def params(self) -> object: ...


class ParamsError(ValueError):
    """Values that do not make a check's parameters (an unknown name, a value of the wrong
    shape): the runner reports it as the check's error, never a crash."""


class Params:
    """The base of every check's parameter class (``parameters``): what ``of`` gives a
    check, and what ``schema_of`` accepts."""

    @classmethod
    def of(cls: type[P], ctx: Judged) -> P:
        """``ctx``'s parameters as this class: the runner bound them from the class the
        check registered with, so anything else is a programming error."""
        params = ctx.params
        if not isinstance(params, cls):
            raise TypeError(f"the check's parameters are {type(params).__name__}, "
                            f"not {cls.__name__}")
        return params


@dataclass_transform(frozen_default=True)
def parameters(cls: type[P]) -> type[P]:
    """The decorator of a check's parameters: a frozen record (agent/model/record.py: a
    dataclass with no method compiled at import; the prolog imports some forty of these on
    every node for every job)."""
    return record(frozen=True)(cls)


@parameters
class NoParams(Params):
    """A check that takes no parameters."""


def param(default: Any, *, doc: str, ge: float | None = None, le: float | None = None,
          length: int | None = None) -> Any:
    """A parameter's field: its default, its doc (``checks explain`` prints it), the
    bounds every number in its value keeps and the length of every list in it. A mapping
    default is copied for each instance; a list is written as a tuple (the parameters are
    frozen)."""
    if isinstance(default, list):
        raise TypeError("a list parameter's default is a tuple")
    if not doc.strip():
        raise TypeError("every parameter says what it is for (doc=)")
    metadata = {"doc": doc, **({"ge": ge} if ge is not None else {}),
                **({"le": le} if le is not None else {}),
                **({"len": length} if length is not None else {})}
    if isinstance(default, dict):
        return field(default_factory=lambda: plain_copy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


_SCALARS: dict[Any, str] = {bool: "bool", int: "int", float: "number", str: "str",
                            type(None): "null", Any: "any"}


def _kinds(hint: Any) -> tuple[Any, ...]:
    """The schema's alternatives for a field's annotation."""
    if hint in _SCALARS:
        return (_SCALARS[hint],)
    origin, args = get_origin(hint), get_args(hint)
    if origin is Union or origin is types.UnionType:
        return tuple(kind for arg in args for kind in _kinds(arg))
    if origin is Literal:
        return tuple(dict.fromkeys(_SCALARS[type(arg)] for arg in args))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return ({"list": _kinds(args[0])},)
    if origin in (dict, Mapping) and len(args) == 2 and args[0] in (str, int):
        return ({"map": _kinds(args[1]), "key": _SCALARS[args[0]]},)
    raise TypeError(f"a parameter cannot be {hint!r}: use bool, int, float, str, "
                    "Literal, tuple[X, ...], Mapping[str | int, X], or X | None")


def _choices(hint: Any) -> tuple[Any, ...]:
    if get_origin(hint) is Literal:
        return get_args(hint)
    return tuple(c for arg in get_args(hint) if get_origin(arg) is Literal
                 for c in get_args(arg))


def schema_of(cls: type[Params]) -> dict[str, dict[str, Any]]:
    """Each parameter's type, bounds and choices, as the manifest carries them."""
    if not (isinstance(cls, type) and issubclass(cls, Params) and is_record(cls)):
        raise TypeError(f"{cls!r}: a check's params are a Params class declared @parameters")
    if not is_frozen(cls):
        raise TypeError(f"{cls.__name__}: a check's params are frozen")
    hints = get_type_hints(cls)
    schema: dict[str, dict[str, Any]] = {}
    for f in fields(cls):
        if not f.metadata.get("doc"):
            raise TypeError(f"{cls.__name__}.{f.name}: declare it with param(..., doc=)")
        entry: dict[str, Any] = {"type": _kinds(hints[f.name])}
        entry.update({k: f.metadata[k] for k in ("ge", "le", "len") if k in f.metadata})
        if choices := _choices(hints[f.name]):
            entry["choices"] = choices
        schema[f.name] = entry
    return schema


def _plain(value: Any) -> Any:
    """A default as YAML would write it (tuples as lists), for the config to merge over."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def defaults_of(cls: type[Params]) -> dict[str, Any]:
    """Each parameter's default, as plain data."""
    return {f.name: _plain(_default(f)) for f in fields(cls)}


def _default(f: RecordField) -> Any:
    if f.default_factory is not MISSING:
        return f.default_factory()
    return f.default


def docs_of(cls: type[Params]) -> dict[str, str]:
    return {f.name: str(f.metadata["doc"]) for f in fields(cls)}


def _shaped(value: Any, kinds: tuple[Any, ...]) -> Any:
    """``value`` in the type the dataclass declares: a whole number as a float where the
    field is a float, lists as tuples, mapping keys as their declared type (YAML's ``48:``
    and JSON's ``"48":`` alike)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value) if "number" in kinds and "int" not in kinds else value
    for kind in kinds:
        if not isinstance(kind, dict):
            continue
        if "list" in kind and isinstance(value, (list, tuple)):
            return tuple(_shaped(v, kind["list"]) for v in value)
        if "map" in kind and isinstance(value, Mapping):
            try:
                return {(int(k) if kind["key"] == "int" else str(k)): _shaped(v, kind["map"])
                        for k, v in value.items()}
            except ValueError as exc:
                raise ParamsError(f"a key is not a whole number ({exc})") from None
    return value


def bind(cls: type[P], schema: Mapping[str, Mapping[str, Any]], values: Mapping[str, Any]
         ) -> P:
    """The parameters ``values`` (defaults merged with the profile's thresholds and the
    config, already validated against ``schema``) give; unknown names are refused."""
    unknown = sorted(set(values) - set(schema))
    if unknown:
        raise ParamsError(f"unknown parameter {unknown[0]!r}")
    return cls(**{k: _shaped(v, schema[k]["type"]) for k, v in values.items()})
