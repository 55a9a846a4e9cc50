"""The check catalog: one package per family (``gpu/``, ``ib/``, ...), a module per concern
inside it, on the layers every family stands on — ``core/`` (the Finding, the registry,
parameters, the catalog index), ``profiles/`` (what a healthy node of each platform has)
and ``catalogs/`` (NVIDIA's Xid catalog, the generated manifest and profile data).
``core/index.py``'s ``FAMILIES`` is the table of contents.

Importing this package imports no family: the Slurm prolog plans from the generated
manifest (``core/index.py``) and imports only the families it runs. Reading ``REGISTRY``,
``select`` or the other names below from here imports every family first, so a caller
that asks for the whole catalog gets all of it.
"""

from __future__ import annotations

import importlib

from .core import index

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from .core.registry import REGISTRY, CheckContext, CheckSpec, check, select

_REGISTRY_NAMES = ("REGISTRY", "CheckContext", "CheckSpec", "check", "select")

__all__ = ["FAMILIES", "REGISTRY", "CheckContext", "CheckSpec", "check", "load_all", "select"]


def __getattr__(name: str) -> object:
    if name in ("FAMILIES", "load_all"):
        return getattr(index, name)
    if name in _REGISTRY_NAMES:
        index.load_all()
        from .core import registry  # the registry only when asked for

        return getattr(registry, name)
    if name in index.FAMILIES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
