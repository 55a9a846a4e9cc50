"""Tools for working on clusterdiag itself, run from the repository's root
(``python -m dev.<tool>``): not part of the installed package."""
