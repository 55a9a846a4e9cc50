"""Plain dataclasses <-> JSON-able values, driven by the type hints.

The snapshot and the reports are plain dataclasses so that checks stay pure and a saved
snapshot can be re-evaluated offline; this module is the one place that knows how to turn
them into JSON and back, so a round trip gives back an equal object.
"""

from __future__ import annotations

import enum
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin

from .record import MISSING, fields, is_record

T = TypeVar("T")


class SerdeError(ValueError):
    """Raised when data does not have the shape a dataclass expects."""


# Exactly these types (not subclasses: a str enum is an Enum first) are JSON as they are.
_PLAIN = frozenset({str, int, float, bool, type(None)})


_FIELDS: dict[type, tuple[tuple[str, bool], ...] | None] = {}


def _fields_of(cls: type) -> tuple[tuple[str, bool], ...] | None:
    """Each field's name and whether it has a default, in order, of a record
    (agent/model/record.py) or a dataclass; None for any other type. Looked up once per
    class, where ``dataclasses.fields`` builds its tuple anew on every call (the agent turns
    a ~10,000-value snapshot into JSON every cycle)."""
    if cls not in _FIELDS:
        if is_record(cls):
            _FIELDS[cls] = tuple((f.name, f.default is not MISSING
                                  or f.default_factory is not MISSING) for f in fields(cls))
        elif hasattr(cls, "__dataclass_fields__"):  # whoever made it imported dataclasses
            import dataclasses  # loaded by whoever made the dataclass

            _FIELDS[cls] = tuple(
                (f.name, f.default is not dataclasses.MISSING
                 or f.default_factory is not dataclasses.MISSING)
                for f in dataclasses.fields(cls))
        else:
            _FIELDS[cls] = None
    return _FIELDS[cls]


def to_jsonable(value: Any) -> Any:
    """Return ``value`` as dicts, lists and scalars (dataclasses become dicts)."""
    cls = type(value)
    if cls in _PLAIN:
        return value
    known = _fields_of(cls)
    if known is not None:
        return {name: to_jsonable(getattr(value, name)) for name, _ in known}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_jsonable(tp: Any, data: Any, where: str = "$") -> Any:
    """Build a value of type ``tp`` from JSON data; raise SerdeError naming the path."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return from_jsonable(arg, data, where)
            except SerdeError as exc:
                errors.append(str(exc))
        raise SerdeError("; ".join(errors) or f"{where}: unexpected null")
    if tp is Any:
        return data
    known = _fields_of(tp) if isinstance(tp, type) else None
    if known is not None:
        if not isinstance(data, dict):
            raise SerdeError(f"{where}: expected an object for {tp.__name__}")
        hints = _hints(tp)
        kwargs = {}
        for name, has_default in known:
            if name in data:
                kwargs[name] = from_jsonable(hints[name], data[name], f"{where}.{name}")
            elif not has_default:
                raise SerdeError(f"{where}: missing key {name!r}")
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(data)
        except ValueError as exc:
            raise SerdeError(f"{where}: {exc}") from None
    if origin is list:
        if not isinstance(data, list):
            raise SerdeError(f"{where}: expected a list")
        (item,) = get_args(tp) or (Any,)
        return [from_jsonable(item, v, f"{where}[{i}]") for i, v in enumerate(data)]
    if origin is tuple:
        if not isinstance(data, list):
            raise SerdeError(f"{where}: expected a list")
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_jsonable(args[0], v, f"{where}[{i}]") for i, v in enumerate(data))
        pairs = enumerate(zip(args, data, strict=False))
        return tuple(from_jsonable(a, v, f"{where}[{i}]") for i, (a, v) in pairs)
    if origin is dict:
        if not isinstance(data, dict):
            raise SerdeError(f"{where}: expected an object")
        _, val = get_args(tp) or (str, Any)
        return {str(k): from_jsonable(val, v, f"{where}.{k}") for k, v in data.items()}
    if tp is float:
        if isinstance(data, (int, float)) and not isinstance(data, bool):
            return float(data)
        raise SerdeError(f"{where}: expected a number")
    if tp in (int, str, bool):
        if isinstance(data, tp) and not (tp is int and isinstance(data, bool)):
            return data
        raise SerdeError(f"{where}: expected {tp.__name__}")
    if tp is type(None):
        if data is None:
            return None
        raise SerdeError(f"{where}: expected null")
    raise SerdeError(f"{where}: cannot read type {tp!r}")
