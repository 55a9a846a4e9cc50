"""Starting the agent and ``--clear``: turn flags and config into an Agent, or a clear.

Every start problem is a ClusterdiagError, printed by the CLI as one line with its exit
code: 2 for configuration (a bad listen address, a missing token file, a non-loopback
address without a token), 3 when the state directory cannot be used.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..base.errors import ExitCode, UsageError
from ..run import session
from ..run.nccl_cache import NAME as NCCL_CACHE
from ..run.nccl_cache import PersistedVersions
from ..settings.config import MIN_INTERVAL_S, seconds_problem
from . import logfmt
from .loop import Agent, Overrides, state_dir
from .notify import Notifier
from .security import security_from
from .state import AGENT, CLEAR_DIR, ID_RE, StateDir

CLEAR_WAIT_S = 5.0


def start(config_path: Path | None, root: Path | None, kernel_log: Path | None,
          simulate: str | None, node: str | None, profile: str | None, level: str | None,
          listen: str | None, interval: float | None, state_path: Path | None) -> ExitCode:
    logfmt.setup()
    notifier = Notifier()  # first: no child may inherit NOTIFY_SOCKET

    if interval is not None and (problem := seconds_problem(interval, MIN_INTERVAL_S)):
        raise UsageError(f"--interval {interval:g}: {problem}")
    config, env = session.setup(config_path, root, kernel_log, simulate, node)
    # Checks the profile name; a site profile file becomes the name it is registered by.
    profile = session.run_options(config, level, profile, None, None).profile if profile \
        else None
    security = security_from(config.section("agent"), listen)
    state = state_dir(config, state_path)
    if isinstance(env.nccl_versions, PersistedVersions):  # beside the report it writes
        env.nccl_versions.path = state.path / NCCL_CACHE
    overrides = Overrides(listen=listen, interval_s=interval, level=level, profile=profile)
    return Agent(config, env, state, security, overrides, notifier).run()


def _running_pid(state: StateDir) -> int | None:
    data = state.read(AGENT)
    pid = data.get("pid") if isinstance(data, dict) else None
    if not isinstance(pid, int) or pid == os.getpid():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    return pid


def clear(config_path: Path | None, state_path: Path | None, event_id: str) -> str:
    """Clear a sticky event: through the running agent (a request file it picks up within
    a second), else in the state file directly. Returns the line to print."""
    if not ID_RE.match(event_id):
        raise UsageError(f"--clear {event_id!r}: not an event id (see the finding's observed)")
    config = session.load(config_path)
    state = state_dir(config, state_path)
    before = {e["id"] for e in state.load_events().active()}
    if event_id != "all" and event_id not in before:
        raise UsageError(f"--clear {event_id}: no active event with that id "
                         f"(active: {', '.join(sorted(before)) or 'none'})")
    if _running_pid(state) is not None:
        state.request_clear(event_id)
        deadline = time.monotonic() + CLEAR_WAIT_S
        while (state.path / CLEAR_DIR / event_id).exists():
            if time.monotonic() > deadline:
                return f"clear of {event_id} queued: the agent has not picked it up yet"
            time.sleep(0.1)
        return f"cleared {event_id} (by the running agent)"
    events = state.load_events()
    done = events.clear(event_id, "cleared with clusterdiag agent --clear")
    state.save_events(events)
    return f"cleared {', '.join(done) or 'nothing'}"

