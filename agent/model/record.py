"""``@record``: a dataclass whose ``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` are
written once here instead of generated per class.

``@dataclass`` writes each class's methods as source text and compiles it when the module is
imported; the prolog without an agent report imports some ninety of these classes (the
snapshot model, the check parameters, the registry's) on every node for every job, and
compiling their methods was about a third of its import time (issue 15). A record is a
real dataclass to everything that reads one (``fields``, ``asdict``, ``replace``,
``is_dataclass``, the serde, mypy, which sees ``dataclasses.dataclass`` itself), and costs
no compilation; its instances are built a little slower (one loop over the fields), which
only matters where millions are made, and there ``@dataclass`` stays.

What a record supports is what this code base uses of dataclasses: ``@record`` and
``@record(frozen=True)``, fields with a default or a ``default_factory``, ``__post_init__``,
and a record subclassing a record. Methods a class writes itself are kept, as dataclasses
keeps them. Whether a class is frozen is ``is_frozen(cls)``: a record's
``__dataclass_params__`` describes what dataclasses generated for it (nothing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError, dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["is_frozen", "record"]

T = TypeVar("T")


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    """Every field from the class's template (its default, or a placeholder), then the
    arguments over it: dict updates and set tests, no Python loop over the fields (the
    instance's ``__dict__`` keeps the fields' order, as a dataclass's does)."""
    cls = type(self)
    names: tuple[str, ...] = cls.__record_names__
    values = self.__dict__
    values.update(cls.__record_template__)
    if args:
        if len(args) > len(names):
            raise TypeError(f"{cls.__qualname__}() takes {len(names)} arguments "
                            f"but {len(args)} were given")
        values.update(zip(names, args, strict=False))
        if kwargs and not kwargs.keys().isdisjoint(names[:len(args)]):
            twice = sorted(kwargs.keys() & set(names[:len(args)]))
            raise TypeError(f"{cls.__qualname__}() got multiple values for {twice[0]!r}")
    values.update(kwargs)
    if len(values) != len(names):
        unknown = sorted(kwargs.keys() - set(names))
        raise TypeError(f"{cls.__qualname__}() got an unexpected keyword argument "
                        f"{unknown[0]!r}")
    if not cls.__record_required__ <= kwargs.keys():
        missing = [name for name in names[len(args):]
                   if name in cls.__record_required__ and name not in kwargs]
        if missing:
            raise TypeError(f"{cls.__qualname__}() missing required argument: "
                            f"{missing[0]!r}")
    for index, name, factory in cls.__record_factories__:
        if index >= len(args) and name not in kwargs:
            values[name] = factory()
    if cls.__record_post_init__:
        self.__post_init__()


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__record_repr__)
    return f"{type(self).__qualname__}({shown})"


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name in type(self).__record_compare__)


def _eq(self: Any, other: object) -> object:
    if other.__class__ is not self.__class__:
        return NotImplemented
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _make(cls: type[T], frozen: bool) -> type[T]:
    """``cls`` as a dataclass with the shared methods. ``dataclass`` is asked for the fields
    alone (no method of its own, so nothing compiled); ``__hash__`` follows dataclasses'
    rule for ``eq=True``: from the fields when frozen, else unhashable, unless the class
    wrote one. A class without a docstring gets its name and fields as one, as dataclasses
    would write it but without asking ``inspect`` for a signature (a tokenizer run each)."""
    explicit_hash = "__hash__" in cls.__dict__ and not (
        cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__)
    undocumented = cls.__doc__ is None  # dataclass would ask inspect for a signature
    if undocumented:
        cls.__doc__ = cls.__name__
    dataclass(cls, init=False, repr=False, eq=False)
    known = fields(cls)  # type: ignore[arg-type]
    if undocumented:
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in known)})"
    attrs: dict[str, Any] = {
        "__record_names__": tuple(f.name for f in known),
        "__record_template__": {f.name: None if f.default is MISSING else f.default
                                for f in known},
        "__record_required__": frozenset(f.name for f in known if f.default is MISSING
                                         and f.default_factory is MISSING),
        "__record_factories__": tuple((index, f.name, f.default_factory)
                                      for index, f in enumerate(known)
                                      if f.default_factory is not MISSING),
        "__record_repr__": tuple(f.name for f in known if f.repr),
        "__record_compare__": tuple(f.name for f in known if f.compare),
        "__record_post_init__": hasattr(cls, "__post_init__"),
        "__record_frozen__": frozen,
    }
    methods: dict[str, Callable[..., Any] | None] = {
        "__init__": _init, "__repr__": _repr, "__eq__": _eq}
    if frozen:
        methods |= {"__setattr__": _frozen_setattr, "__delattr__": _frozen_delattr}
    for name, method in methods.items():
        if name not in cls.__dict__:
            attrs[name] = method
    if not explicit_hash:
        attrs["__hash__"] = _hash if frozen else None
    for name, value in attrs.items():
        type.__setattr__(cls, name, value)
    return cls


def is_frozen(cls: type) -> bool:
    """Whether ``cls`` is a frozen record or a frozen dataclass: a record's
    ``__dataclass_params__`` says what dataclasses generated for it, which is nothing."""
    if "__record_frozen__" in cls.__dict__:
        return bool(cls.__dict__["__record_frozen__"])
    params = getattr(cls, "__dataclass_params__", None)
    return bool(params is not None and params.frozen)


def _record(cls: type[T] | None = None, /, *,
            frozen: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """``@record`` or ``@record(frozen=True)``, as ``@dataclass`` is written."""
    if cls is None:
        return lambda decorated: _make(decorated, frozen)
    return _make(cls, frozen)


if TYPE_CHECKING:
    from dataclasses import dataclass as record
else:
    record = _record
