"""Slurm entry points: the prolog, the epilog and the health check, and what they share.

Each module has one job: ``scontrol`` talks to Slurm, ``reason`` words a drain reason and
reads it back, ``job`` reads the job's environment, ``agent_report`` reads the daemon's
latest report, ``entry`` sets a program up, keeps its budget and turns findings into an
exit code and a drain, and ``prolog``, ``epilog`` and ``healthcheck`` are the three
programs Slurm runs.
"""
