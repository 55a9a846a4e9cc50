"""Copies of plain data (what JSON and YAML read: scalars, lists, dicts).

``copy.deepcopy`` does the same for such values, but importing ``copy`` (and ``weakref``
with it) costs the prolog ~1.5 ms on every start, and the config's defaults and the
built-in profiles are all it is needed for there. It sits at the bottom because the config
(agent/settings/) and the profiles (checks/profiles/) both use it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from typing import Any


def plain_copy(value: Any) -> Any:
    """``value`` with its own lists and dicts, so that no caller's edits reach another's;
    anything else (scalars, tuples of scalars) is shared, being immutable."""
    if isinstance(value, dict):
        return {k: plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain_copy(v) for v in value]
    return value
