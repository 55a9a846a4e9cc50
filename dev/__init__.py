"""Tools for working on clusterdiag itself: not part of the installed package."""
