"""``run_check``: one check judged as the runner judges it, for every family's tests.

Its parameters are bound the runner's way (agent/run/runner.py ``bound_params``: the check's
defaults, under the profile's ``thresholds``, under the overrides as a config's
``checks.<id>``), after the overrides are validated as a config file's are, so a test
cannot hand a check a value no config could. Every finding is held to the check's
declaration: a failure or warning asks only for an action the check declares, a pass
or skip for none, and a skip or error says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.run.runner import bound_params
from clusterdiag.agent.settings.config import Config, validate_check_params
from clusterdiag.checks import REGISTRY  # reading it loads every family
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.checks.core.index import schemas
from clusterdiag.checks.core.levels import Level, Mode
from clusterdiag.checks.core.registry import CheckContext, History
from clusterdiag.checks.profiles.profile import Profile, load_profile


def run_check(check_id: str, snapshot: Snapshot, *, profile: Profile | str | None = None,
              params: Mapping[str, Any] | None = None, mode: Mode | str = Mode.RUN,
              level: Level | str = Level.QUICK, now: float | None = None,
              previous: Snapshot | None = None, history: History | None = None
              ) -> list[Finding]:
    """The findings of ``check_id`` on ``snapshot`` under ``profile`` (a name or a
    Profile; the generic one when None), with ``params`` overriding its defaults; ``now``
    defaults to when the snapshot was taken."""
    spec = REGISTRY[check_id]
    prof = load_profile(profile or "generic") if not isinstance(profile, Profile) else profile
    overrides = dict(params or {})
    validate_check_params({check_id: overrides}, "run_check", schemas())
    config = Config()
    config.data["checks"] = {check_id: overrides}
    ctx = CheckContext(snapshot=snapshot, profile=prof, params=bound_params(spec, config, prof),
                       level=Level(level), mode=Mode(mode),
                       now=snapshot.taken_at if now is None else now, previous=previous,
                       history=history or History())
    findings = list(spec.func(ctx))
    assert findings, f"{check_id} yielded no finding"
    for f in findings:
        if f.status in (Status.FAIL, Status.WARN):
            assert f.action in spec.actions, (f"{check_id} asks for an undeclared action", f)
        elif f.status in (Status.PASS, Status.SKIP):
            assert f.action is Action.NONE, (f"{check_id} asks for an action on a pass", f)
        if f.status in (Status.SKIP, Status.ERROR):
            assert f.message, (f"{check_id} gives no reason", f)
    return findings
