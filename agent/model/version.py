"""clusterdiag's version. In the model because every node and cluster report carries it and
``cluster.versions`` compares the agents' with the gatherer's (reports/ imports only the
model from agent/)."""

VERSION = "0.1.0"
