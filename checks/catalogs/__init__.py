"""Data the checks read: NVIDIA's Xid catalog, and the generated manifest and profile data
(``python -m clusterdiag.checks.core.generate --write``) that let a run plan without importing
the families or PyYAML."""
