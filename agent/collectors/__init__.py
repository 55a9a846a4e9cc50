"""Collectors: each turns one source into plain snapshot data, with no judgement."""
