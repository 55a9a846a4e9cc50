"""The check catalog: declared units, registered explicitly, looked up by id or glob.

A check is a plain function of a :class:`CheckContext` that yields findings. Its
declaration says what it needs (sources), at which levels it runs, its parameters (a
frozen dataclass of checks/core/params.py, overridable by profile and config) and the remedy
``checks explain`` shows.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Mapping
from typing import Any, cast

from ...agent.model.record import field, record
from ...agent.model.snapshot import SOURCE_FIELDS, Snapshot
from ..catalogs.manifest import CHECKS
from ..profiles.profile import Profile
from .finding import Action, Finding
from .levels import Level, Mode, levels_of
from .params import NoParams, Params, bind, defaults_of, schema_of
from .validation import Validation, recheck


@record(frozen=True)
class History:
    """What the agent remembers across cycles that a check judges by; a one-shot run has
    none (every field None).

    ``counter_window`` is the oldest checkpoint of the agent's counter window within the
    hour (agent/daemon/counterwindow.py), as its state file holds it: ``{"taken_at": float,
    "counters": {component: {counter name: int}}}``. The state dir is hostile input, so it
    stays untyped here and checks/core/window.py validates it before judging by it.
    """

    counter_window: Mapping[str, Any] | None = None


@record
class CheckContext:
    """What a check judges. ``params`` is the check's parameter dataclass, bound by the
    runner (a check reads it as ``ItsParams.of(ctx)``)."""

    snapshot: Snapshot
    profile: Profile
    params: Params = field(default_factory=NoParams)
    level: Level = Level.QUICK
    mode: Mode = Mode.RUN
    now: float = 0.0
    previous: Snapshot | None = None  # an earlier sample of the same node, for rates
    history: History = field(default_factory=History)  # the agent's, across cycles
    profile_source: str = "config"  # config | detected | tied | ambiguous
    profile_reason: str = ""


CheckFunc = Callable[[CheckContext], Iterable[Finding]]


@record(frozen=True)
class CheckSpec:
    id: str
    func: CheckFunc
    summary: str
    needs: tuple[str, ...]
    remedy: str
    params: Mapping[str, Any]  # the defaults, as plain data (what a config merges over)
    rate: bool  # judges counters over time: skipped at quick, needs two samples
    active: bool  # runs a workload (e.g. all_reduce_perf): full only
    skip_in: frozenset[Mode]  # modes where it does not apply (fabric.imex in the prolog)
    actions: tuple[Action, ...]  # what it can ask for when it fails or warns
    privileged: bool = False  # reads what only root may (PCI config space): the prolog
    # re-runs it when the hardened agent had to skip it
    params_type: type[Params] = NoParams
    # Each parameter's type, bounds and choices (checks/core/params.py), as the manifest has it.
    schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # What returns a node this check drained to service (checks/core/validation.py).
    validation: Validation | None = None

    @property
    def levels(self) -> tuple[Level, ...]:
        return levels_of(self.rate, self.active)

    def bind(self, values: Mapping[str, Any]) -> Params:
        """The parameters the check gets from ``values`` (its defaults merged with the
        profile's thresholds and the config); ParamsError when they do not fit."""
        return bind(self.params_type, self.schema, values)


REGISTRY: dict[str, CheckSpec] = {}


class DuplicateCheckError(RuntimeError):
    """Two checks registered under one id: a programming error caught at import."""


class UnknownNeedError(RuntimeError):
    """A check needs a source the Snapshot does not have (a typo would otherwise leave
    the check running without the data it reads): caught at import."""


def check(
    check_id: str,
    *,
    needs: Iterable[str],
    remedy: str,
    params: type[Params] = NoParams,
    rate: bool = False,
    active: bool = False,
    skip_in: Iterable[str] = (),
    actions: Iterable[Action] = (),
    privileged: bool = False,
    validation: Validation | None = None,
) -> Callable[[CheckFunc], CheckFunc]:
    """Register ``func`` as check ``check_id``; its docstring's first line is its summary.
    ``needs`` names Snapshot fields (``SOURCE_FIELDS``); any other name is refused.
    ``params`` is a frozen dataclass of ``Params`` (checks/core/params.py); one that is not,
    or a parameter of a type no config can say, is refused. ``validation`` is what returns
    a node it drained to service; without one, the check passing again after the hold-down
    (checks/core/validation.py ``recheck``)."""
    needs = tuple(needs)
    # The schema as the generated manifest has it, where it has the check: working it out
    # (type hints resolved per parameter) was a tenth of the catalog's import, on every
    # prolog. The manifest is written from schema_of itself (index.fields_of),
    # and a test fails while it is stale.
    written = CHECKS.get(check_id)
    schema = cast("Mapping[str, Mapping[str, Any]]", written["schema"]) \
        if written is not None else schema_of(params)
    defaults = defaults_of(params)
    modes = frozenset(Mode(mode) for mode in skip_in)  # a typo fails the import
    unknown = sorted(set(needs) - SOURCE_FIELDS)
    if unknown:
        raise UnknownNeedError(f"check {check_id!r} needs {', '.join(map(repr, unknown))}: "
                               f"not a Snapshot source ({', '.join(sorted(SOURCE_FIELDS))})")

    def register(func: CheckFunc) -> CheckFunc:
        if check_id in REGISTRY:
            raise DuplicateCheckError(f"check {check_id!r} registered twice")
        doc = (func.__doc__ or "").strip().splitlines()
        REGISTRY[check_id] = CheckSpec(
            id=check_id,
            func=func,
            summary=doc[0] if doc else check_id,
            needs=needs,
            remedy=remedy,
            params=defaults,
            rate=rate,
            active=active,
            skip_in=modes,
            actions=tuple(actions),
            privileged=privileged,
            params_type=params,
            schema=schema,
            validation=validation or recheck(check_id),
        )
        return func

    return register


def select(patterns: Iterable[str] | None) -> list[CheckSpec]:
    """The registered checks whose id matches any glob (all when no pattern), in id order."""
    pats = [p.strip() for p in (patterns or []) if p.strip()]
    specs = sorted(REGISTRY.values(), key=lambda s: s.id)
    if not pats:
        return specs
    return [s for s in specs if any(fnmatch.fnmatchcase(s.id, p) for p in pats)]
