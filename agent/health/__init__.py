"""A node's way back to service: its health lifecycle (lifecycle.py) and the state file
that keeps it (store.py). docs/return-to-service.md tells the whole story."""
