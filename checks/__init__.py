"""The check catalog. ``FAMILIES`` is its table of contents: a family not listed here does
not exist. A family is a module (``nvswitch.py``) or a package of modules, one per concern
(``gpu/``), whose ``__init__`` imports them all.

Importing this package imports no family: the Slurm prolog plans from the generated
manifest (``index.py``) and imports only the families it runs. Reading ``REGISTRY``,
``select`` or the other names below from here imports every family first, so a caller
that asks for the whole catalog gets all of it.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .registry import REGISTRY, CheckContext, CheckSpec, check, select

FAMILIES = ("fabric", "gpu", "host", "host_profile", "ib", "nccl", "nvlink", "nvswitch",
            "versions")
_REGISTRY_NAMES = ("REGISTRY", "CheckContext", "CheckSpec", "check", "select")

__all__ = ["FAMILIES", "REGISTRY", "CheckContext", "CheckSpec", "check", "load_all", "select"]


def load_all() -> None:
    """Import every family, registering all its checks."""
    for family in FAMILIES:
        importlib.import_module(f"{__name__}.{family}")


def __getattr__(name: str) -> object:
    if name in _REGISTRY_NAMES:
        load_all()
        from . import registry

        return getattr(registry, name)
    if name in FAMILIES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
