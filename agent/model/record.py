"""``@record``: dataclasses for the prolog's path, without the ``dataclasses`` module.

``@dataclass`` writes each class's methods as source text and compiles it when the module
is imported, and importing ``dataclasses`` brings ``inspect`` (with ``ast``, ``dis`` and
``tokenize``); the prolog without an agent report imports some ninety of these classes
(the snapshot model, the check parameters, the registry's) on every node for every job, and
the two together were over a third of its import time. A record's ``__init__``,
``__repr__``, ``__eq__`` and ``__hash__`` are written once, here; its fields are read from
its annotations as dataclasses reads them. Only modules on the prolog's path use it
(tests/unit/test_prolog_imports.py holds them to it); everywhere else, ``@dataclass``.

To the code on that path a record is read through this module: ``field``, ``fields``,
``replace``, ``is_record``, ``MISSING``. To everything else it is a dataclass: the first
time anything asks for ``__dataclass_fields__`` (``dataclasses.fields``, ``asdict``,
``replace``, ``is_dataclass``, a dataclass subclassing it), the record answers with the
fields ``dataclasses`` itself works out for the same annotations and defaults. mypy checks
this implementation as it runs: ``record`` is marked ``dataclass_transform`` (PEP 681), so a
record's generated ``__init__`` is typed from its fields. Instances are built a little
slower than a generated ``__init__`` builds them (dict updates and set tests over the
fields), which matters only where millions are made, and there ``@dataclass`` stays.

What a record supports is what this code base uses of dataclasses: ``@record`` and
``@record(frozen=True)``, fields with a default or a ``default_factory`` (and
``metadata``, ``repr``, ``compare``), ``__post_init__``, a record extending a record of the
same frozenness, and a dataclass extending a record (it is a dataclass then: read it with
``dataclasses``). Methods a class writes itself are kept, as dataclasses keeps them. What
it does not support is refused when the class is made, never half-done: a mutable default
(a list, a dict) and a required field after a defaulted one, as dataclasses refuses them;
a dataclass base, an own ``__setattr__``, ``init=False``, ``kw_only`` and ``hash`` fields.
Known differences: the ``__init__``'s signature reads ``(*args, **kwargs)``, and equality
compares the fields as one tuple (NaN equals itself, as in dataclasses before 3.13).
This module's ``fields`` and ``replace`` take records only; on a dataclass use
``dataclasses``'.
"""

from __future__ import annotations

import reprlib
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Any:
        """PEP 681's marker, read by type checkers only (``typing`` has it from 3.11):
        at run time the decorator as it is."""
        return lambda decorated: decorated

__all__ = ["MISSING", "RecordField", "dataclass_transform", "field", "fields", "is_frozen",
           "is_record", "record", "replace"]

T = TypeVar("T")


class _Missing:
    """No default: the sentinel of a record's fields (``dataclasses.MISSING`` is the
    dataclasses module's, which the path does not import)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class RecordField:
    """One field of a record: what ``dataclasses.Field`` says of it, for the code that
    reads a record through this module."""

    __slots__ = ("compare", "default", "default_factory", "metadata", "name", "repr", "type")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING,
                 metadata: Mapping[str, Any] | None = None, repr: bool = True,
                 compare: bool = True) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.type: Any = None
        self.default = default
        self.default_factory = default_factory
        self.metadata: Mapping[str, Any] = dict(metadata or {})
        self.repr = repr
        self.compare = compare

    def __repr__(self) -> str:
        return f"RecordField(name={self.name!r}, default={self.default!r})"


@overload
def field(*, default: T, metadata: Mapping[str, Any] | None = None, repr: bool = True,
          compare: bool = True) -> T: ...
@overload
def field(*, default_factory: Callable[[], T], metadata: Mapping[str, Any] | None = None,
          repr: bool = True, compare: bool = True) -> T: ...
@overload
def field(*, metadata: Mapping[str, Any] | None = None, repr: bool = True,
          compare: bool = True) -> Any: ...
def field(*, default: Any = MISSING, default_factory: Any = MISSING,
          metadata: Mapping[str, Any] | None = None, repr: bool = True,
          compare: bool = True) -> Any:
    """A field's default, factory and metadata, as ``dataclasses.field`` takes them."""
    return RecordField(default, default_factory, metadata, repr, compare)


def _init(self: Any, /, *args: Any, **kwargs: Any) -> None:
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


@reprlib.recursive_repr()
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
    from dataclasses import FrozenInstanceError  # only on a programming error

    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    from dataclasses import FrozenInstanceError  # dataclasses stays off the prolog's path

    raise FrozenInstanceError(f"cannot delete field {name!r}")


class _AsDataclass:
    """``__dataclass_fields__`` and ``__dataclass_params__`` of a record, worked out by
    ``dataclasses`` the first time something asks (it is imported by then: only its own
    functions and a dataclass's subclassing ask), then kept on the class."""

    def __init__(self, attribute: str) -> None:
        self.attribute = attribute

    def __get__(self, instance: object, owner: Any) -> Any:
        import dataclasses  # dataclasses stays off the prolog's path until something asks

        known: tuple[RecordField, ...] = owner.__record_fields__
        namespace: dict[str, Any] = {
            "__module__": owner.__module__, "__qualname__": owner.__qualname__,
            "__doc__": owner.__doc__, "__annotations__": {f.name: f.type for f in known}}
        for f in known:
            namespace[f.name] = dataclasses.field(
                default=f.default if f.default is not MISSING else dataclasses.MISSING,
                default_factory=(f.default_factory if f.default_factory is not MISSING
                                 else dataclasses.MISSING),
                metadata=f.metadata, repr=f.repr, compare=f.compare)
        shadow: Any = dataclasses.dataclass(type(owner.__name__, (), namespace), init=False,
                                       repr=False, eq=False, frozen=owner.__record_frozen__)
        for attribute in ("__dataclass_fields__", "__dataclass_params__"):
            type.__setattr__(owner, attribute, getattr(shadow, attribute))
        return getattr(owner, self.attribute)


def _is_class_var(annotation: Any) -> bool:
    """``ClassVar``, ``ClassVar[...]``, ``typing.ClassVar[...]`` (any module alias)."""
    text = annotation if isinstance(annotation, str) else repr(annotation)
    return text.split("[", 1)[0].rsplit(".", 1)[-1] == "ClassVar"


def _spec_of(value: Any) -> RecordField:
    """The field a class body's value declares: this module's ``field``, a plain default,
    or ``dataclasses.field`` (a record written with it keeps working: one can only exist
    where dataclasses is imported already)."""
    if isinstance(value, RecordField):
        return value
    dataclasses = sys.modules.get("dataclasses")
    if dataclasses is not None and isinstance(value, dataclasses.Field):
        def own(given: Any) -> Any:
            return MISSING if given is dataclasses.MISSING else given

        if value.init is False or value.kw_only is True or value.hash is not None:
            raise TypeError("a record's field takes default, default_factory, metadata, "
                            "repr and compare, not init, kw_only or hash")
        return RecordField(own(value.default), own(value.default_factory), value.metadata,
                           value.repr, value.compare)
    return RecordField(default=value)


def _own_fields(cls: type) -> tuple[RecordField, ...]:
    """The fields of ``cls``: its record bases' first, then its own annotations in order,
    each with the default its class body gives (a redefined field keeps its place)."""
    found: dict[str, RecordField] = {}
    for base in reversed(cls.__mro__[1:]):
        if "__dataclass_fields__" in base.__dict__ and "__record_fields__" not in base.__dict__:
            raise TypeError(f"{cls.__qualname__}: a record cannot extend the dataclass "
                            f"{base.__qualname__} (make it a record)")
        for f in base.__dict__.get("__record_fields__", ()):
            found[f.name] = f
    # The class's own annotations (3.10+ never hands a base's to a class without any):
    # inspect.get_annotations would import inspect, which records keep off the path.
    for name, annotation in getattr(cls, "__annotations__", {}).items():
        if _is_class_var(annotation):
            continue
        spec = _spec_of(cls.__dict__.get(name, MISSING))
        spec.name, spec.type = name, annotation
        if spec.default is not MISSING and type(spec.default).__hash__ is None:
            raise ValueError(f"mutable default {type(spec.default)} for field {name} is "
                             "not allowed: use default_factory")
        if spec.default is MISSING:
            if name in cls.__dict__:
                type.__delattr__(cls, name)
        else:
            type.__setattr__(cls, name, spec.default)
        found[name] = spec
    defaulted = ""
    for f in found.values():
        if f.default is not MISSING or f.default_factory is not MISSING:
            defaulted = defaulted or f.name
        elif defaulted:
            raise TypeError(f"{cls.__qualname__}: non-default argument {f.name!r} follows "
                            f"default argument {defaulted!r}")
    return tuple(found.values())


def _make(cls: type[T], frozen: bool) -> type[T]:
    """``cls`` with its fields and the shared methods. ``__hash__`` follows dataclasses'
    rule for ``eq=True``: from the fields when frozen, else unhashable, unless the class
    wrote one."""
    explicit_hash = "__hash__" in cls.__dict__ and not (
        cls.__dict__["__hash__"] is None and "__eq__" in cls.__dict__)
    if "__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__:
        raise TypeError(f"{cls.__qualname__}: a record sets its fields itself (no own "
                        "__setattr__ or __delattr__)")
    if any(base.__dict__.get("__record_frozen__", frozen) != frozen for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__qualname__}: a record is frozen exactly when its record "
                        "bases are")
    known = _own_fields(cls)
    if cls.__doc__ is None:  # as dataclasses writes one, names only
        type.__setattr__(cls, "__doc__", f"{cls.__name__}({', '.join(f.name for f in known)})")
    attrs: dict[str, Any] = {
        "__record_fields__": known,
        "__record_frozen__": frozen,
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
        "__dataclass_fields__": _AsDataclass("__dataclass_fields__"),
        "__dataclass_params__": _AsDataclass("__dataclass_params__"),
    }
    methods: dict[str, Any] = {
        "__init__": _init, "__repr__": _repr, "__eq__": _eq, "__replace__": replace,
        "__match_args__": tuple(f.name for f in known)}
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


@overload
def record(cls: type[T], /) -> type[T]: ...
@overload
def record(*, frozen: bool = False) -> Callable[[type[T]], type[T]]: ...
@dataclass_transform(field_specifiers=(field, RecordField))
def record(cls: type[T] | None = None, /, *,
           frozen: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """``@record`` or ``@record(frozen=True)``, as ``@dataclass`` is written."""
    if cls is None:
        return lambda decorated: _make(decorated, frozen)
    return _make(cls, frozen)


def _class_of(value: Any) -> type:
    return value if isinstance(value, type) else type(value)


def is_record(value: Any) -> bool:
    """Whether ``value`` is a record or a record's instance: the nearest class of its MRO
    that was made a record or a dataclass was made a record (a dataclass extending a
    record is a dataclass, with fields of its own)."""
    for cls in _class_of(value).__mro__:
        if "__record_fields__" in cls.__dict__:
            return True
        if "__dataclass_fields__" in cls.__dict__:
            return False
    return False


def fields(value: Any) -> tuple[RecordField, ...]:
    """A record's fields (of the class or an instance), in order."""
    if not is_record(value):
        raise TypeError(f"{value!r} is not a record")
    cls: Any = _class_of(value)
    fields_: tuple[RecordField, ...] = cls.__record_fields__
    return fields_


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record ``obj`` with ``changes``, built through its ``__init__``."""
    if isinstance(obj, type) or not is_record(obj):
        raise TypeError("replace() should be called on a record instance")
    cls: Any = type(obj)
    values = {name: getattr(obj, name) for name in cls.__record_names__}
    made: T = cls(**{**values, **changes})
    return made


def is_frozen(cls: Any) -> bool:
    """Whether ``cls`` is a frozen record, or a frozen dataclass."""
    if is_record(cls):
        return bool(cls.__record_frozen__)
    params = getattr(cls, "__dataclass_params__", None)
    return bool(params is not None and params.frozen)
