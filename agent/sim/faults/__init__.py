"""Simulated faults: the table of kinds (catalog.py) and the change each makes to a node's
state (gpu kinds in catalog.py, ib.py, nccl.py, qualify.py). Imports the state, never the
writers: a fault changes what the node is, and the writers show it."""
