"""``clusterdiag agent``: the node daemon (docs/design.md §6).

What it leaves in its state directory (``agent.state_dir``, default /var/lib/clusterdiag)
is a contract other parts read without talking to the daemon:

- ``report.json``: the latest node report, exactly ``NodeReport.to_dict()`` JSON, rewritten
  atomically (temp file, fsync, rename, directory fsync) after every collection. The Slurm
  prolog reads it and judges its freshness by ``started_at`` + ``duration_s`` against the
  agent's interval, so a reader never sees a half-written report.
- ``agent.json``: ``{"interval_s": float, "pid": int, "listen": str}``, written at start
  (and again when SIGHUP changes the interval).
- ``snapshot.json``: the latest snapshot, the earlier sample for the next collection's rates
  and what ``GET /v1/snapshot`` serves.
- ``events.json``: every NVML XID event the agent recorded, with whether and why it was
  cleared. An event is written here before it is logged as recorded, so ``kill -9`` at any
  moment loses none.
- ``counter_window.json``: checkpoints of the last hour (one every 5 min) of the event
  counters that trickle — InfiniBand ``link_downed``/``link_error_recovery``, NVLink
  replays and recoveries (counterwindow.py, checks/core/window.py) — so ``ib.error_rate`` and
  ``nvlink.error_rate`` judge an hour of them across restarts. (Earlier versions kept
  ``ib_window.json`` with ``link_downed`` only; an old file is ignored, not migrated: the
  window refills within the hour.)
- ``clear/<id>``: a request to clear a sticky finding, left by ``clusterdiag agent --clear``
  for the running agent (or applied at its next start).

A directory that fills up or turns read-only after start does not stop the agent: it logs
``state_write_failed``, reports an ``agent.state_dir`` warning, serves from memory and
retries each second until the files land again (persist.py). An XID event that arrives
meanwhile is logged as ``xid_recorded_in_memory``, not ``xid_recorded``.
"""
