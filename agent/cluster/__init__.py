"""Cluster runs outside the CLI: gathering node reports and judging them (``run --nodes``,
``report merge``), and the demo's simulated fleet on loopback.

Each function returns a ClusterReport; rendering and exit codes are the CLI's
(agent/cli/output.py). Importing this package costs nothing: the report machinery loads
when a function runs.
"""
