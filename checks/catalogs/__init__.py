"""Data the checks read: NVIDIA's Xid catalog, and the generated manifest and profile data
(``python -m dev.regenerate``) that let a run plan without importing the families or
PyYAML."""
