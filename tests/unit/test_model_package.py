"""The model package loads its names on first use: importing one model imports no other,
and the names read through the package (or a Snapshot read from JSON) are what they were
when the package imported every model itself."""

from __future__ import annotations

import subprocess
import sys
import typing

import clusterdiag.agent.model as model
from clusterdiag.agent.model.host import HostInfo
from clusterdiag.agent.model.kernel import KernelLog

# The models a Snapshot's fields name that a run of the GPU and PCI sources does not read.
OTHER_SOURCES = ("host", "ib", "kernel", "nccl")


def _fresh(code: str) -> str:
    """What ``code`` prints in a fresh interpreter: a module-level import here would
    already have loaded what the test looks for."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True).stdout.strip()


def test_importing_one_model_imports_no_other() -> None:
    loaded = _fresh("import sys, clusterdiag.agent.model.record; print(sorted(m for m in "
                    "sys.modules if m.startswith('clusterdiag.agent.model.')))")
    assert loaded == "['clusterdiag.agent.model.record']"


def test_a_snapshot_built_from_its_own_module_leaves_the_other_sources_models_out() -> None:
    code = ("import sys; from clusterdiag.agent.model.snapshot import Snapshot; "
            "Snapshot(node='n1', taken_at=1.0); "
            f"print([m for m in {OTHER_SOURCES!r} if 'clusterdiag.agent.model.' + m "
            "in sys.modules])")
    assert _fresh(code) == "[]"


def test_a_snapshot_read_from_its_own_module_resolves_every_field_type() -> None:
    """``from_dict`` in an interpreter that never asked the package for Snapshot: the
    field types its annotations name are imported for serde to resolve."""
    code = ("from clusterdiag.agent.model.snapshot import Snapshot; "
            "snap = Snapshot.from_dict({'node': 'n1', 'taken_at': 1.0, "
            "'host': {'hostname': 'n1'}, 'kernel_log': {'source': 'kmsg'}}); "
            "print(type(snap.host).__name__, type(snap.kernel_log).__name__)")
    assert _fresh(code) == "HostInfo KernelLog"


def test_the_package_names_are_the_snapshot_modules() -> None:
    from clusterdiag.agent.model import snapshot

    for name in model.__all__:
        assert getattr(model, name) is getattr(snapshot, name)
    hints = typing.get_type_hints(model.Snapshot)
    assert hints["host"] == HostInfo | None
    assert hints["kernel_log"] == KernelLog | None

