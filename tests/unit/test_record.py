"""``@record`` behaves as ``@dataclass`` does for every use this code base makes of it: each
case builds the same class both ways and compares what they do."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass, field
from typing import Any

import pytest

from clusterdiag.agent.model.record import is_frozen, record

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
    """What the record is for (issue 15): its methods are the module's, shared by every
    record, where each dataclass gets its own compiled ones."""
    first, second = _port(record), _port(record(frozen=True))
    for name in ("__init__", "__eq__", "__repr__"):
        assert getattr(first, name) is getattr(second, name)
    assert _port(dataclass).__init__ is not _port(dataclass).__init__


def test_a_class_without_a_docstring_gets_its_fields_as_one() -> None:
    class Bare:
        name: str
        rate: float = 0.0

    assert record(Bare).__doc__ == "Bare(name, rate)"
