"""The Snapshot: everything a node run read, as plain data with no judgement in it.

Checks import this package and nothing else from ``agent``. A snapshot survives a JSON
round trip unchanged, so it can be saved, shipped and re-evaluated offline.

The package imports nothing itself: its names (snapshot.py's) are loaded when first asked
for (PEP 562's module ``__getattr__``), so that importing one model
(``from clusterdiag.agent.model.record import record``) does not import every other: the
prolog's re-run of two checks pays for their sources' models only
(tests/unit/test_prolog_imports.py). Asked for through the package, ``Snapshot`` comes with
its field types resolvable (``snapshot.field_types``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .snapshot import READABLE_SCHEMAS, SNAPSHOT_SCHEMA, SOURCE_FIELDS, Snapshot, SourceStats

__all__ = ["READABLE_SCHEMAS", "SNAPSHOT_SCHEMA", "SOURCE_FIELDS", "Snapshot", "SourceStats"]


def __getattr__(name: str) -> object:
    """One of ``__all__``, from snapshot.py, loaded on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Imported here: the package's own import must not load the snapshot's models.
    from . import snapshot

    snapshot.field_types()
    value = getattr(snapshot, name)
    globals()[name] = value
    return value
