"""``clusterdiag profiles capture``: a site profile written from a healthy node as it is, or
from the majority of a fleet's snapshots."""
