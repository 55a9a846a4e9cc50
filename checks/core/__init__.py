"""What every check family stands on: the Finding, levels, parameters, the registry and the
catalog index, counters as rates, and the facts derived from a snapshot that several
families judge (PCIe distances, which NICs are compute rails)."""
