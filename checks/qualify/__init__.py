"""Judging active tests: each node's figures against the platform's expectations and its
peers (``judge``), and the tests between nodes (``cross``)."""
