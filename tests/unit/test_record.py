"""``@record`` behaves as ``@dataclass`` does for every use this code base makes of it: each
case builds the same class both ways and compares what they do."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import subprocess
import sys
import typing
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any, ClassVar

import pytest

from clusterdiag.agent.model.record import MISSING, fields, is_frozen, is_record, record, replace
from clusterdiag.agent.model.record import field as record_field

Decorator = Callable[[type], type]
BOTH = pytest.mark.parametrize("deco", [dataclass, record], ids=["dataclass", "record"])
BOTH_FROZEN = pytest.mark.parametrize("deco", [dataclass(frozen=True), record(frozen=True)],
                                      ids=["dataclass", "record"])


def _port(deco: Decorator) -> type:
    class Port:
        """A class of the model's kind: a required field, defaults, a factory."""

        name: str
        rate: float = 0.0
        state: str | None = None
        counters: dict[str, int] = field(default_factory=dict)
        lanes: list[int] = field(default_factory=lambda: [1, 2])

    return deco(Port)


@BOTH
def test_arguments_defaults_and_factories(deco: Decorator) -> None:
    port = _port(deco)
    a, b = port("mlx5_0"), port("mlx5_1", 400.0, counters={"x": 1})
    assert (a.name, a.rate, a.state, a.counters, a.lanes) == ("mlx5_0", 0.0, None, {}, [1, 2])
    assert (b.name, b.rate, b.counters) == ("mlx5_1", 400.0, {"x": 1})
    assert a.counters is not port("c").counters  # a fresh factory value per instance
    given = port("p", 1.0, "up", {"y": 2}, [3])  # a factory field given by position
    assert (given.counters, given.lanes) == ({"y": 2}, [3])
    assert list(vars(given)) == ["name", "rate", "state", "counters", "lanes"]


@BOTH
@pytest.mark.parametrize(("args", "kwargs", "says"), [
    ((), {}, "missing"),
    (("a",), {"speed": 1}, "unexpected keyword argument 'speed'"),
    (("a",), {"name": "b"}, "multiple values"),
    (("a", 1.0, "up", {}, [], "extra"), {}, "were given"),
    ((), {"rate": 2.0}, "'name'"),
])
def test_wrong_arguments_raise_type_error(deco: Decorator, args: tuple[Any, ...],
                                          kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(TypeError, match=says):
        _port(deco)(*args, **kwargs)


@BOTH
def test_equality_repr_and_hash_of_a_mutable_one(deco: Decorator) -> None:
    port = _port(deco)
    assert port("a", 1.0) == port("a", 1.0)
    assert port("a", 1.0) != port("a", 2.0)
    assert port("a") != _port(deco)("a")  # another class with the same fields
    assert repr(port("a", state="up")).endswith(
        "Port(name='a', rate=0.0, state='up', counters={}, lanes=[1, 2])")
    assert port.__hash__ is None
    one = port("a")
    one.rate = 3.0
    assert one.rate == 3.0


@BOTH_FROZEN
def test_a_frozen_one_refuses_changes_and_hashes_by_value(deco: Decorator) -> None:
    port = _port(deco)
    one = port("a", 1.0)
    with pytest.raises(FrozenInstanceError):
        one.rate = 2.0
    with pytest.raises(FrozenInstanceError):
        del one.rate
    assert hash(port("a", 1.0, counters=None, lanes=None)) == hash(
        port("a", 1.0, counters=None, lanes=None))
    assert len({port("a", 1.0, counters=None, lanes=None),
                port("a", 1.0, counters=None, lanes=None)}) == 1
    assert is_frozen(port)
    assert not is_frozen(_port(dataclass))
    assert not is_frozen(_port(record))


@BOTH_FROZEN
def test_the_dataclasses_functions_work_on_it(deco: Decorator) -> None:
    port = _port(deco)
    one = port("a", 1.0, counters={"x": 1})
    assert dataclasses.is_dataclass(one)
    assert [f.name for f in dataclasses.fields(one)] == [
        "name", "rate", "state", "counters", "lanes"]
    assert dataclasses.asdict(one) == {"name": "a", "rate": 1.0, "state": None,
                                       "counters": {"x": 1}, "lanes": [1, 2]}
    changed = dataclasses.replace(one, rate=5.0)
    assert (changed.rate, changed.counters, one.rate) == (5.0, {"x": 1}, 1.0)
    assert copy.deepcopy(one) == one
    assert port.__match_args__ == ("name", "rate", "state", "counters", "lanes")


def test_a_record_pickles_and_unpickles_equal() -> None:
    assert pickle.loads(pickle.dumps(PickledPort("a", 2.0))) == PickledPort("a", 2.0)


@record(frozen=True)
class PickledPort:
    """Pickle finds a class by its module's name: this one is at module level."""

    name: str
    rate: float = 0.0


@BOTH
def test_post_init_subclasses_and_own_methods(deco: Decorator) -> None:
    calls: list[str] = []

    class Base:
        """A base with its own ``__repr__``, kept over the generated one."""

        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

    base = deco(Base)

    class Child(base):  # type: ignore[valid-type, misc]
        """A subclass adding a field, with ``__post_init__``."""

        size: int = 1

        def __post_init__(self) -> None:
            calls.append(self.name)

    child = deco(Child)
    one = child("x", 2)
    assert (one.name, one.size, calls) == ("x", 2, ["x"])
    assert repr(base("y")) == "<y>"
    assert repr(one).endswith("Child(name='x', size=2)")  # the subclass's own, generated
    assert child("x", 2) == child("x", 2) != child("x", 3)


def test_a_record_compiles_no_method() -> None:
    """What the record is for: its methods are the module's, shared by every
    record, where each dataclass gets its own compiled ones."""
    first, second = _port(record), _port(record(frozen=True))
    for name in ("__init__", "__eq__", "__repr__"):
        assert getattr(first, name) is getattr(second, name)
    assert _port(dataclass).__init__ is not _port(dataclass).__init__


def test_the_modules_own_functions_read_a_record() -> None:
    """What the prolog's path reads records with (no dataclasses module there)."""
    port = _port(record)
    one = port("a", 1.0)
    assert is_record(port)
    assert is_record(one)
    assert not is_record(_port(dataclass))
    assert not is_record(1)
    assert [(f.name, f.default) for f in fields(one)][:3] == [
        ("name", MISSING), ("rate", 0.0), ("state", None)]
    assert fields(port)[3].default_factory is dict
    changed = replace(one, state="up")
    assert (changed.name, changed.state, one.state) == ("a", "up", None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'speed'"):
        replace(one, speed=1)
    with pytest.raises(TypeError):
        fields(_port(dataclass))


def test_record_fields_declared_either_way_are_the_same() -> None:
    @record
    class Own:
        """Declared with this module's field."""

        tags: list[str] = record_field(default_factory=list, metadata={"doc": "d"})

    @record
    class Stdlib:
        """Declared with dataclasses.field (dataclasses imported: the test's own import)."""

        tags: list[str] = field(default_factory=list, metadata={"doc": "d"})

    for cls in (Own, Stdlib):
        (tags,) = fields(cls)
        assert (tags.default, tags.default_factory, dict(tags.metadata)) == (
            MISSING, list, {"doc": "d"})
        assert cls().tags == []
        assert cls().tags is not cls().tags


def test_a_mutable_default_is_refused_as_dataclasses_refuses_it() -> None:
    class Holder:
        """A list as a plain default: shared by every instance, so refused."""

        items: list[int] = []  # noqa: RUF012 - the mistake under test

    with pytest.raises(ValueError, match="mutable default"):
        record(Holder)


def test_a_dataclass_may_subclass_a_record() -> None:
    base = _port(record(frozen=True))

    @dataclass(frozen=True)
    class Wider(base):  # type: ignore[valid-type, misc]
        """Made by dataclasses, which reads the record's fields as its own."""

        speed: int = 0

    one = Wider("a", speed=3)
    assert (one.name, one.rate, one.speed) == ("a", 0.0, 3)


def test_records_do_not_import_dataclasses() -> None:
    """The point of the module: the model, the catalog and the registry load without it
    (nor inspect, which it imports)."""
    code = ("import sys; import clusterdiag.agent.model, clusterdiag.checks, "
            "clusterdiag.agent.run.runner, clusterdiag.agent.model.serde; "
            "print(sorted({'dataclasses', 'inspect'} & set(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert proc.stdout.strip() == "[]"


def test_a_dataclass_extending_a_record_is_read_as_the_dataclass_it_is() -> None:
    from clusterdiag.agent.model.serde import from_jsonable, to_jsonable

    @record(frozen=True)
    class Base:
        """A record."""

        name: str
        rate: float = 0.0

    @dataclass(frozen=True)
    class Wider(Base):
        """A dataclass with a field of its own."""

        speed: int = 0

    one = Wider("a", speed=3)
    assert not is_record(one)
    assert to_jsonable(one) == {"name": "a", "rate": 0.0, "speed": 3}
    assert from_jsonable(Wider, {"name": "a", "speed": 3}) == one
    assert dataclasses.replace(one, rate=1.0).speed == 3


def _refused(body: dict[str, object], annotations: dict[str, str], *,
             bases: tuple[type, ...] = (), frozen: bool = False) -> None:
    cls = type("Bad", bases, {"__doc__": "d", "__annotations__": annotations, **body})
    record(frozen=True)(cls) if frozen else record(cls)


@pytest.mark.parametrize(("build", "says"), [
    (lambda: _refused({"a": 1}, {"a": "int", "b": "int"}), "follows default"),
    (lambda: _refused({"x": field(default=0, init=False)}, {"x": "int"}), "not init"),
    (lambda: _refused({"x": field(default=0, kw_only=True)}, {"x": "int"}), "not init"),
    (lambda: _refused({"__setattr__": lambda *a: None}, {"x": "int"}), "__setattr__"),
    (lambda: _refused({}, {"y": "int"}, bases=(dataclass(type("D", (), {})),)), "dataclass"),
    (lambda: _refused({}, {"y": "int"}, bases=(_port(record(frozen=True)),)), "frozen"),
])
def test_what_a_record_does_not_support_is_refused_when_made(build: Callable[[], None],
                                                             says: str) -> None:
    with pytest.raises(TypeError, match=says):
        build()


def test_class_vars_self_fields_and_self_references() -> None:
    @record
    class Node:
        """A field named self, a ClassVar however it is spelled, a reference to itself."""

        self: str
        other: Node | None = None
        count: ClassVar[int] = 0
        spelled: typing.ClassVar[int] = 0

    one = Node(self="a")
    one.other = one
    assert [f.name for f in fields(Node)] == ["self", "other"]
    assert repr(one).endswith("Node(self='a', other=...)")
    assert Node.__match_args__ == ("self", "other")
    if sys.version_info >= (3, 13):
        assert copy.replace(one, self="b").self == "b"  # type: ignore[attr-defined]
