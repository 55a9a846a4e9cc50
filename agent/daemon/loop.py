"""The agent's main loop: collect every interval, record XID events, serve, tell systemd.

One asyncio loop in the main thread owns all state. Collections run in one worker thread
(they block on files, commands and the forked NVML worker, each under its deadline) and
state files are written by one writer thread, in order. The loop itself only ticks: it
feeds systemd's watchdog, picks up clear requests and starts the next collection. So the
watchdog says "the agent is alive", never "every GPU answered": a wedged GPU shows up as a
``gpu.responsive`` failure in the report, not as a restart loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import time
from collections import Counter
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ...checks.core.levels import Level, Mode
from ...reports.model.node import NodeReport
from ..base.errors import ClusterdiagError, CollectError, ExitCode
from ..collectors.kept import keep
from ..health import store as health_store
from ..health.store import HealthFile
from ..model import Snapshot
from ..model.kernel import PreviousBoot
from ..model.serde import SerdeError
from ..read import nvml_library
from ..read.sources import SourceEnv, real_nvml
from ..run import session
from ..run.collect import one_line
from ..run.runner import RunOptions
from ..settings.config import Config
from . import boot_records, cycle, xid
from .commands import KeptRunner
from .counterwindow import COUNTER_WINDOW_FILE, CounterWindow
from .metric_labels import MetricSettings, settings_from
from .metrics import AgentView, registry_for
from .notify import Notifier
from .persist import Persister
from .security import Listen, Security, reloaded
from .server import RateLimited, make_app, serve
from .state import AGENT, EVENTS, REPORT, SNAPSHOT, XID, StateDir
from .sticky import event_from, resolved

log = logging.getLogger("clusterdiag.agent")

# A listener that exits is started again after this pause, doubled after each exit that
# came before it was ready, up to the cap: a driver that fails every nvmlInit costs a fork
# of the agent every 10 minutes, not every 30 s forever.
LISTENER_RESTART_S = 30.0
LISTENER_RESTART_MAX_S = 600.0
# During an XID storm the report is judged again at most this often: each judging is the
# whole catalog, and a new event still reaches report.json within ~1 s plus one judging.
REJUDGE_MIN_S = 1.0
PREVIOUS_MAX_AGE_INTERVALS = 4  # an older saved sample would average a rate over too long


@dataclass
class Overrides:
    """Command-line values that win over the config file, also across SIGHUP reloads."""

    listen: str | None = None
    interval_s: float | None = None
    level: str | None = None
    profile: str | None = None


class Agent:
    def __init__(self, config: Config, env: SourceEnv, state: StateDir, security: Security,
                 overrides: Overrides, notifier: Notifier | None = None) -> None:
        self.config, self.env, self.state, self.security = config, env, state, security
        self.overrides = overrides
        self._bound_agent = dict(config.section("agent"))  # listen and TLS: fixed at start
        self.notifier = notifier or Notifier({})
        self.view = AgentView(settings=self._metric_settings(), health=HealthFile(state.path))
        self.registry = registry_for(lambda: self.view)
        self.events = state.load_events()
        self.view.xid_counts = Counter(_xid_key(e) for e in self.events.items
                                       if e.get("kind", XID) == XID)
        # What reading the previous boot's kernel log said; None until the first
        # collection has read it (once per start: boot_records.py).
        self._previous_boot: str | None = None
        self.previous = self._load_previous()
        self.counter_window = CounterWindow.from_dict(state.read(COUNTER_WINDOW_FILE),
                                                    env.node)
        self._report: bytes | None = None
        self._snapshot: bytes | None = None
        self._metrics: tuple[tuple[Any, ...], bytes] | None = None
        self._collecting: asyncio.Task[None] | None = None
        # Why to collect again as soon as the running collection ends: one that started
        # before a clear must not be the last word on the cleared event.
        self._again: str | None = None
        self._last_start = 0.0
        self._next_due = 0.0
        self._stop = asyncio.Event()
        self._napping: asyncio.Future[None] | None = None
        self._listener: xid.Listener | None = None
        # Not running because NVML's library is not there (no fork until a collection
        # finds it), and the pending restart of one that exited, with its exits so far.
        self._listener_waiting = False
        self._listener_retry: asyncio.TimerHandle | None = None
        self._listener_exits = 0
        self._bound = ""
        self._tasks: set[asyncio.Task[Any]] = set()
        self._collector = ThreadPoolExecutor(1, thread_name_prefix="collect")
        # XID events from the listener not yet on disk, and whether a flush is running:
        # events that arrive while one burst is written go out together in the next write.
        self._pending_xids: list[dict[str, Any]] = []
        self._flushing = False
        self._basis: _Basis | None = None  # the last collection, for judging it again
        self._rejudge_due: asyncio.TimerHandle | None = None
        self._last_rejudge = 0.0
        # An event recorded while a collection runs: that collection judges it only if it
        # had not judged yet; once it has (it is writing its report), judge again after it.
        self._rejudge_when_collected = False
        self.persist = Persister(state, self.view)
        # Answers that change only by someone's hand (commands.py) and the attributes
        # fixed while a device exists (collectors/kept.py), kept a while. Not under the
        # simulator: it answers commands in-process and rewrites its tree as faults come.
        self._kept: KeptRunner | None = None
        if not env.simulated:
            env.runner = self._kept = KeptRunner(env.runner, self._keep_s())
            keep(self._keep_s())

    # --- settings -------------------------------------------------------------------

    @property
    def interval_s(self) -> float:
        return float(self.overrides.interval_s or self.config.section("agent")["interval_s"])

    def options(self) -> RunOptions:
        data = self.config.data
        return RunOptions(level=Level(self.overrides.level or Level.FULL), mode=Mode.AGENT,
                          budget_s=float(data["budget_s"]),
                          profile=self.overrides.profile or data["profile"],
                          full_interval_s=float(data["full_interval_s"]))

    def _keep_s(self) -> float:
        return float(self.config.section("agent")["keep_s"])

    def _metric_settings(self) -> MetricSettings:
        return settings_from(self.config.section("metrics"), self.env.node, self.env.simulated,
                             self.env.environ)

    def _load_previous(self) -> Snapshot | None:
        data = self.state.read(SNAPSHOT)
        if data is None:
            return None
        try:
            snap = Snapshot.from_dict(data)
        except (SerdeError, TypeError, ValueError) as exc:
            log.warning("state_snapshot_unusable", extra={"error": str(exc)[:120]})
            return None
        age = time.time() - snap.taken_at
        if snap.node != self.env.node or not 0 <= age <= PREVIOUS_MAX_AGE_INTERVALS * \
                self.interval_s:
            return None
        return snap

    # --- NodeApi (server.py) --------------------------------------------------------

    def report_body(self) -> bytes | None:
        return self._report

    def snapshot_body(self) -> bytes | None:
        return self._snapshot

    def health_body(self) -> bytes:
        assert self.view.health is not None
        return health_store.body(self.view.health.current())

    def metrics_body(self) -> bytes:
        """Rendered once per change of what it shows: rendering a dgx-h100's ~140 KB costs
        ~8 ms of the one event loop, so 200 scrapers at once would starve every other
        request (and the watchdog) if each rendered its own copy."""
        key = self.view.version()
        if self._metrics is None or self._metrics[0] != key:
            self._metrics = (key, self.registry.text())
        return self._metrics[1]

    async def refresh(self) -> None:
        if self._collecting is None:
            wait = float(self.config.section("agent")["refresh_min_interval_s"]) - (
                time.monotonic() - self._last_start)
            if wait > 0:
                raise RateLimited(wait)
            self._start_collection("refresh")
        assert self._collecting is not None
        await asyncio.shield(self._collecting)

    async def clear(self, event_id: str) -> list[str]:
        return await self._clear(event_id, "cleared over the API")

    # --- the loop -------------------------------------------------------------------

    def run(self) -> ExitCode:
        """Serve until SIGTERM/SIGINT; the exit status."""
        self.state.sweep()
        self._start_listener()
        try:
            return asyncio.run(self._main())
        finally:
            if self._listener is not None:
                self._listener.stop()
            self._collector.shutdown(wait=False, cancel_futures=True)
            self.persist.shutdown()

    async def _main(self) -> ExitCode:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, self._request_stop)
        loop.add_signal_handler(signal.SIGINT, self._request_stop)
        loop.add_signal_handler(signal.SIGHUP, self._reload)
        if self._listener is not None:
            loop.add_reader(self._listener.fd, self._on_listener)
        listen = self.security.listen
        app = make_app(lambda request: self, lambda: self.security.token,
                       self.security.open_paths)
        try:
            runner, port = await serve(app, [listen.host], listen.port, self.security.tls)
        except OSError as exc:  # in use, not ours, no such address: one line, exit 3
            raise CollectError(f"cannot listen on {listen}: "
                               f"{_bind_reason(exc)}") from None
        self._bound = str(Listen(listen.host, port))
        await self._write_agent_json()
        log.info("started", extra={"listen": self._bound, "tls": bool(
            self.security.tls), "token": self.security.token is not None,
            "interval_s": self.interval_s, "state_dir": str(self.state.path),
            "node": self.env.node, "pid": os.getpid(), "watchdog_s": self.notifier.watchdog_s})
        try:
            self._start_collection("start")
            await self._tick_until_stopped()
        finally:
            self.notifier.stopping()
            await runner.cleanup()
            log.info("stopped", extra={"node": self.env.node})
        return ExitCode.READY

    async def _tick_until_stopped(self) -> None:
        tick = 1.0
        if self.notifier.watchdog_s:
            tick = min(tick, self.notifier.watchdog_s / 4)
        while not self._stop.is_set():
            self.notifier.watchdog()
            if await self.persist.retry() and self._collecting is None:
                self._start_collection("state_writable")  # a fresh report on disk now
            await self._take_clear_requests()
            if self._collecting is None and time.monotonic() >= self._next_due:
                self._start_collection("interval")
            wait = tick if self._collecting else min(tick, self._next_due - time.monotonic())
            await self._nap(max(0.01, wait))

    async def _nap(self, seconds: float) -> None:
        """Until ``seconds`` pass or a stop is asked, on one timer and one future: an
        ``asyncio.wait_for`` of the stop event makes a task and three futures a tick, and
        the idle agent does little else (about a third of its CPU between collections)."""
        loop = asyncio.get_running_loop()
        self._napping = waiter = loop.create_future()
        timer = loop.call_later(seconds, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._napping = None

    def _request_stop(self) -> None:
        self._stop.set()
        if self._napping is not None:
            _wake(self._napping)

    async def _write_agent_json(self) -> None:
        await self._write(AGENT, json.dumps({"interval_s": self.interval_s, "pid": os.getpid(),
                                             "listen": self._bound}).encode())

    def _status(self) -> str:
        verdict = json.loads(self._report or b"{}").get("verdict", "none")
        return f"verdict {verdict}, every {self.interval_s:g} s"

    # --- collections ----------------------------------------------------------------

    def _start_collection(self, why: str) -> None:
        self._last_start = time.monotonic()
        self._next_due = self._last_start + self.interval_s
        self._collecting = asyncio.get_running_loop().create_task(self._collect(why))
        self._collecting.add_done_callback(self._collected)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _collected(self, task: asyncio.Task[None]) -> None:
        self._collecting = None
        if self._stop.is_set():
            return
        self._listener_after_collection()
        if self._again is not None:
            why, self._again = self._again, None
            self._start_collection(why)
        if self._rejudge_when_collected:
            self._rejudge_when_collected = False
            self._schedule_rejudge()

    async def _collect(self, why: str) -> None:
        loop = asyncio.get_running_loop()
        started = time.time()
        options = self.options()
        try:
            snap = await loop.run_in_executor(self._collector, cycle.collect, self.env,
                                              self.config, options)
            if self._previous_boot is None:
                found = await loop.run_in_executor(self._collector, cycle.read_previous_boot,
                                                   self.env)
                await self._keep_previous_boot(found, snap)
            await self._resolve_events(snap)
            basis = _Basis(snap, list(snap.nvml.events) if snap.nvml else [], self.previous,
                           started)
            self._rejudge_when_collected = False  # this judging has every event so far
            report = cycle.judge(snap, self.config, options, self.previous, self.events, started,
                                 self.counter_window, self._previous_boot)
            basis.duration_s = report.duration_s
        except Exception as exc:  # a bad cycle is logged with its traceback; the agent goes on
            self.view.collection_errors += 1
            log.error("collection_failed", extra={"why": why, "error": one_line(exc)},
                      exc_info=True)
            return
        snapshot_body = json.dumps(snap.to_dict()).encode()
        await self._write(SNAPSHOT, snapshot_body)
        if self.counter_window.add(snap):
            await self._write(COUNTER_WINDOW_FILE,
                              json.dumps(self.counter_window.to_dict()).encode())
        self.persist.annotate(report)
        report_body = json.dumps(report.to_dict()).encode()
        first = self._report is None
        self.previous, self._report, self._snapshot = snap, report_body, snapshot_body
        self._basis = basis
        self._account(snap, report)
        # report.json last: once it is on disk, every other file and what HTTP serves
        # already belong to this cycle (readers take its appearance as "the cycle is done")
        await self._write(REPORT, report_body)
        fails = [f"{f.check}:{f.component}" for f in report.failures()]
        log.info("collected", extra={"why": why, "verdict": report.verdict.value,
                                     "duration_s": report.duration_s, "fails": len(fails),
                                     "first_fail": fails[0] if fails else "-",
                                     "nvml_calls": self._nvml_calls(snap)})
        if first:
            self.notifier.ready(self._status())  # READY=1 only once a report exists
        else:
            self.notifier.status(self._status())

    @staticmethod
    def _nvml_calls(snap: Snapshot) -> int:
        stats = snap.sources.get("nvml")
        return stats.calls if stats is not None else 0

    def _account(self, snap: Snapshot, report: NodeReport) -> None:
        self.view.snapshot, self.view.report = snap, report
        self.view.collections += 1
        self.view.nvml_calls += self._nvml_calls(snap)
        self.view.last_success = time.time()

    async def _write(self, name: str, body: bytes) -> bool:
        return await self.persist.write(name, body)

    # --- XID events -----------------------------------------------------------------

    def _start_listener(self) -> None:
        """Fork the listener, unless NVML's library cannot be loaded (a node without the
        driver, or before it is installed): the listener's nvmlInit could only fail, and
        then each collection asks again (one dlopen), so it starts once the library is
        there."""
        if self.env.nvml is real_nvml and nvml_library.missing():
            if not self._listener_waiting:
                log.warning("xid_listener_waiting", extra={
                    "why": f"{nvml_library.LIBRARY} not found; started when a collection "
                           "finds it"})
            self._listener_waiting = True
            self._listener = None
            return
        self._listener_waiting = False
        try:
            self._listener = xid.start(self.env)
        except Exception as exc:  # noqa: BLE001 - no listener: collections still run
            log.error("xid_listener_failed", extra={"error": one_line(exc)})
            self._listener = None

    def _on_listener(self) -> None:
        listener = self._listener
        if listener is None:
            return
        messages = listener.read()
        loop = asyncio.get_running_loop()
        if messages is None:
            loop.remove_reader(listener.fd)
            listener.stop()
            self._listener = None
            pause = min(LISTENER_RESTART_MAX_S, LISTENER_RESTART_S * 2 ** self._listener_exits)
            self._listener_exits += 1
            log.warning("xid_listener_exited", extra={"restart_in_s": pause})
            self._listener_retry = loop.call_later(pause, self._restart_listener)
            return
        for message in messages:
            kind = message.get("t")
            if kind == "xid":
                self._pending_xids.append(message)
            elif kind in ("unsupported", "error", "crash"):
                log.warning(f"xid_listener_{kind}", extra={
                    k: v for k, v in message.items() if k != "t"})
            elif kind == "ready":
                self._listener_exits = 0
                log.info("xid_listener_ready", extra={"gpus": len(message.get("gpus", [])),
                                                      "pid": listener.pid})
        if self._pending_xids and not self._flushing:
            self._flushing = True
            self._spawn(self._flush_xids())

    def _restart_listener(self) -> None:
        self._listener_retry = None
        if self._stop.is_set() or self._listener is not None:
            return
        self._start_listener()
        if self._listener is not None:
            asyncio.get_running_loop().add_reader(self._listener.fd, self._on_listener)

    def _listener_after_collection(self) -> None:
        """A listener that is not running starts now, not after its pause, when it waits
        for NVML's library, or when NVML answered this collection and the listener died
        once since it was last ready (killed, say). One that keeps dying before it is
        ready while NVML answers (its events unsupported here) waits out its pauses."""
        if self._listener is not None:
            return
        nvml = self.previous.nvml if self.previous is not None else None
        answered = nvml is not None and nvml.library_error is None
        if self._listener_waiting or (answered and self._listener_exits <= 1):
            if self._listener_retry is not None:
                self._listener_retry.cancel()
            self._restart_listener()

    async def _flush_xids(self) -> None:
        """Record the listener's events a burst at a time: one durable write of the events
        file covers every event that arrived while the last write was under way (so a
        storm of 8/s is a few writes, not 8 with two fsyncs each), and each event is on disk
        before it is logged as recorded. The report then follows by judging the last
        collection again with the new events, not by collecting the node again."""
        try:
            while self._pending_xids:
                batch, self._pending_xids = self._pending_xids, []
                added = [event for event in map(self._event_from, batch)
                         if event is not None and self.events.add(event)]
                if not added:
                    continue
                saved = await self._write_events()
                for event in added:
                    self.view.xid_counts[_xid_key(event)] += 1
                    log.warning("xid_recorded" if saved else "xid_recorded_in_memory", extra={
                        "id": event["id"], "xid": event["xid"], "gpu": event["gpu_index"]})
                self._schedule_rejudge()
        finally:
            self._flushing = False

    @staticmethod
    def _event_from(message: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return event_from(message)
        except (KeyError, TypeError, ValueError):
            log.warning("xid_event_malformed", extra={"message": str(message)[:200]})
            return None

    def _schedule_rejudge(self) -> None:
        """Judge again now, or ``REJUDGE_MIN_S`` after the last time; one pending judging
        covers every event recorded before it runs."""
        if self._rejudge_due is not None:
            return
        wait = max(0.0, self._last_rejudge + REJUDGE_MIN_S - time.monotonic())
        self._rejudge_due = asyncio.get_running_loop().call_later(
            wait, lambda: self._spawn(self._scheduled_rejudge()))

    async def _scheduled_rejudge(self) -> None:
        self._rejudge_due = None
        self._last_rejudge = time.monotonic()
        await self._rejudge("xid")

    async def _rejudge(self, why: str) -> None:
        """The last collection judged again with the events as they are now, written as
        the report. Its times stay the collection's: the report is no fresher than the
        data in it, so a prolog trusts it no longer than it would have. A collection
        under way judges the new events itself, or, when it has judged already and is
        writing its report, they are judged again once it is done; before the first
        collection there is nothing to judge again."""
        basis = self._basis
        if self._collecting is not None:
            self._rejudge_when_collected = True
            return
        if basis is None:
            self._start_collection(why)
            return
        snap = basis.snap
        if snap.nvml is not None:  # without the events the last judging injected
            snap = replace(snap, nvml=replace(snap.nvml, events=list(basis.nvml_events)))
        options = self.options()
        try:
            report = await asyncio.get_running_loop().run_in_executor(
                self._collector, cycle.judge, snap, self.config, options, basis.previous,
                self.events, basis.started, self.counter_window, self._previous_boot)
        except Exception as exc:  # a bad judging is logged; the next collection retries
            self.view.collection_errors += 1
            log.error("rejudge_failed", extra={"why": why, "error": one_line(exc)},
                      exc_info=True)
            return
        report.duration_s = basis.duration_s
        self.persist.annotate(report)
        body = json.dumps(report.to_dict()).encode()
        self._report = body
        self.view.report = report
        await self._write(REPORT, body)  # last, as in a collection: HTTP already serves it
        log.info("rejudged", extra={"why": why, "verdict": report.verdict.value,
                                    "fails": len(report.failures())})

    async def _keep_previous_boot(self, found: PreviousBoot, snap: Snapshot) -> None:
        """The previous boot's records as events (boot_records.py), once per start; those
        read at an earlier start of this boot are already there, cleared or not."""
        self._previous_boot = found.read
        added = [e for e in boot_records.events_from(found, snap)
                 if self.events.add(e)]
        if added:
            await self._write_events()
        log.info("previous_boot_read", extra={"read": found.read,
                                              "new": ",".join(e["id"] for e in added)})

    async def _write_events(self) -> bool:
        return await self._write(EVENTS, self.state.events_body(self.events))

    async def _resolve_events(self, snap: Snapshot) -> None:
        changed = False
        for event in self.events.active():
            why = resolved(snap, event)
            if why:
                self.events.clear(str(event["id"]), why)
                log.info("xid_resolved", extra={"id": event["id"], "why": why})
                changed = True
        if changed:
            await self._write_events()

    async def _clear(self, event_id: str, why: str) -> list[str]:
        done = self.events.clear(event_id, why)
        if done:
            await self._write_events()
            log.info("xid_cleared", extra={"ids": ",".join(done), "why": why})
            if self._collecting is None:
                self._start_collection("clear")
            else:
                self._again = "clear"
        return done

    async def _take_clear_requests(self) -> None:
        if not self.persist.healthy:  # left on disk, applied once the events can be saved
            return
        for event_id in self.state.take_clear_requests():
            done = await self._clear(event_id, "cleared with clusterdiag agent --clear")
            if not done:
                log.warning("clear_unknown_id", extra={"id": event_id})
            self.state.done_clear_request(event_id)

    # --- SIGHUP ---------------------------------------------------------------------

    def _reload(self) -> None:
        path = self.config.path
        try:
            new = session.load(path)
            security, restart = reloaded(self.security, self._bound_agent,
                                         new.section("agent"), self.overrides.listen)
        except ClusterdiagError as exc:
            log.error("config_reload_refused", extra={"file": path or "-", "error": str(exc)})
            return
        for setting in restart:
            log.warning("config_needs_restart", extra={
                "setting": setting, "why": "bound at start: the running value stays"})
        interval = self.interval_s
        self.config, self.security = new, security
        if self._kept is not None:
            self._kept.keep_s = self._keep_s()
            keep(self._keep_s())
        self.view.settings = self._metric_settings()
        if self.interval_s != interval:
            self._next_due = self._last_start + self.interval_s
            self._spawn(self._write_agent_json())
        log.info("config_reloaded", extra={"file": path or "-", "interval_s": self.interval_s})


def _bind_reason(exc: OSError) -> str:
    """The errno's words ("address already in use"), without asyncio's restatement of the
    address the caller already names."""
    return os.strerror(exc.errno).lower() if exc.errno else str(exc)


@dataclass
class _Basis:
    """A collection as it was before judging: enough to judge it again when an event
    comes (the NVML events it held before the recorded ones were injected, the sample
    before it for the rate checks, and when it started and how long it took)."""

    snap: Snapshot
    nvml_events: list[Any]
    previous: Snapshot | None
    started: float
    duration_s: float = 0.0


def _xid_key(event: dict[str, Any]) -> tuple[str, str]:
    gpu = event.get("gpu_index")
    return (str(gpu) if gpu is not None else "", str(event["xid"]))


def state_dir(config: Config, override: Path | None) -> StateDir:
    return StateDir(override or Path(config.section("agent")["state_dir"]))


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
