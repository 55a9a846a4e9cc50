"""The check catalog without importing it: ids, levels, flags, families, default
parameters and their schema (type, bounds: checks/core/params.py), read from the generated
``manifest.py``; a family is imported only when one
of its checks is about to run.

The Slurm prolog starts on every node for every job, and with a fresh agent report it
runs at most a check or two: importing the ten check families (and the snapshot model,
the profiles and PyYAML they pull in) would cost it several interpreter starts. So which
checks a run selects, and what the config may set for each, is answered here from plain
data; ``specs`` imports the families of the selected checks and returns their registered
specs. The manifest is written from the registry by ``generate.py``.
"""

from __future__ import annotations

import importlib
import sys

from ..catalogs.manifest import CHECKS
from .finding import Finding
from .levels import Level, Mode, levels_of

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from .registry import CheckSpec

FAMILIES = ("fabric", "gpu", "host", "ib", "nccl", "nvlink", "nvswitch")
"""The catalog's table of contents: a family not listed here does not exist. A family is a
package of ``checks/``, a module per concern, whose ``__init__`` lists them (``MODULES``)
and imports none: ``specs`` imports only the modules of the checks it is asked for, and
``load_all`` every module of every family."""
PACKAGE = __package__.rpartition(".")[0]
"""``clusterdiag.checks``: the families are its subpackages."""


class Entry:
    """One check as the manifest describes it (the fields of ``CheckSpec`` a plan reads)."""

    __slots__ = ("active", "family", "id", "module", "needs", "params", "privileged", "rate",
                 "schema", "skip_in")

    def __init__(self, check_id: str, fields: Mapping[str, Any]) -> None:
        self.id: str = check_id
        self.family: str = fields["family"]
        self.module: str = fields["module"]
        self.needs: tuple[str, ...] = tuple(fields["needs"])
        self.rate: bool = fields["rate"]
        self.active: bool = fields["active"]
        self.skip_in: frozenset[Mode] = frozenset(Mode(m) for m in fields["skip_in"])
        self.privileged: bool = fields["privileged"]
        self.params: Mapping[str, Any] = fields["params"]
        self.schema: Mapping[str, Mapping[str, Any]] = fields["schema"]

    @property
    def levels(self) -> tuple[Level, ...]:
        return levels_of(self.rate, self.active)


ENTRIES: dict[str, Entry] = {check_id: Entry(check_id, fields)
                             for check_id, fields in CHECKS.items()}


def family_of(module: str) -> str:
    """The family a check's module belongs to: the module or package right under
    ``checks/`` (``gpu`` for ``checks/gpu/memory.py``), the one ``specs`` imports; for a
    check defined elsewhere (a test's), its own module's name."""
    prefix = f"{PACKAGE}."
    if module.startswith(prefix):
        return module.removeprefix(prefix).split(".", 1)[0]
    return module.rsplit(".", 1)[-1]


def module_of(module: str) -> str:
    """A check's module as the manifest names it: its path under ``checks/`` (``gpu.memory``
    for ``checks/gpu/memory.py``), the one ``specs`` imports; for a check defined elsewhere
    (a test's), its own module's name."""
    return module.removeprefix(f"{PACKAGE}.")


def fields_of(spec: CheckSpec) -> dict[str, Any]:
    """A registered check as the manifest writes it: the schema worked out from the
    parameter class, never the one the registry took from the manifest."""
    from .params import schema_of  # loaded with the registry, which holds every spec

    return {"family": family_of(spec.func.__module__),
            "module": module_of(spec.func.__module__), "needs": spec.needs,
            "rate": spec.rate, "active": spec.active,
            "skip_in": tuple(sorted(mode.value for mode in spec.skip_in)),
            "privileged": spec.privileged, "params": dict(spec.params),
            "schema": schema_of(spec.params_type)}


def known() -> dict[str, Entry]:
    """The manifest's checks, and any registered since it was written (a check defined
    outside the catalog's families, as tests do) once the registry is loaded."""
    registry = sys.modules.get(f"{__package__}.registry")
    if registry is None:
        return ENTRIES
    extra = {check_id: Entry(check_id, fields_of(spec))
             for check_id, spec in registry.REGISTRY.items() if check_id not in ENTRIES}
    return {**ENTRIES, **extra} if extra else ENTRIES


def schemas() -> dict[str, Mapping[str, Mapping[str, Any]]]:
    """Every known check's parameter schema by id (checks/core/params.py): what the config's
    ``checks:`` and the site profiles' ``thresholds:`` are validated against."""
    return {check_id: entry.schema for check_id, entry in known().items()}


def select(patterns: Iterable[str] | None) -> list[Entry]:
    """The checks whose id matches any glob (all when no pattern), in id order."""
    pats = [p.strip() for p in (patterns or []) if p.strip()]
    found = sorted(known().values(), key=lambda e: e.id)
    if not pats:
        return found
    import fnmatch  # fnmatch only for --checks patterns

    return [e for e in found if any(fnmatch.fnmatchcase(e.id, p) for p in pats)]


def skip_reason(entry: Entry, enabled: bool, level: str, mode: str) -> str | None:
    """Why a selected check does not run at this level and in this mode, or None.

    ``level`` and ``mode`` are a Level and a Mode, or their words: the prolog plans with the
    level of the agent's report as that report spells it (hostile input, never coerced)."""
    if not enabled:
        return "disabled in config"
    if level not in entry.levels:
        return ("judges counters over time: needs two samples (--level full)" if entry.rate
                else "active test: runs at --level full")
    if mode in entry.skip_in:
        return f"does not apply in the {mode}"
    if entry.active and mode == Mode.AGENT:
        return "active test: the agent never loads the GPUs (run it with clusterdiag run)"
    return None


def plan(patterns: Iterable[str], enabled: Mapping[str, bool] | None, level: str,
         mode: str) -> tuple[list[Entry], list[Finding]]:
    """The checks to run, and the skip findings for those selected but not run.
    ``enabled`` maps a check id to False where the config turned it off."""
    run: list[Entry] = []
    skipped: list[Finding] = []
    for entry in select(patterns):
        reason = skip_reason(entry, (enabled or {}).get(entry.id, True), level, mode)
        if reason:
            skipped.append(Finding.skip("node", reason).replace(check=entry.id))
        else:
            run.append(entry)
    return run, skipped


# The checks that judge NVML being unusable; every other NVML check skips then, pointing
# at them, so a node without a working driver shows one clear failure, not thirty errors.
NVML_DOWN_JUDGES = frozenset({"gpu.responsive", "gpu.count"})

# The checks that read of the PCI source only what agent/collectors/pci.py ``read_topology``
# reads: nccl.acs (checks/nccl/pcie.py ``acs``) reads a function's vendor, class and the
# bridges above it (``topology.gpus``, ``topology.pci_nics``), and a bridge's ACS control
# or why it was unreadable. When every check re-run that needs PCI is one of these, the
# PCI source reads a third of its files.
PCI_TOPOLOGY_ONLY = frozenset({"nccl.acs"})


def nvml_down_skip(check_id: str, down: str) -> Finding:
    """What a check that needs NVML (other than ``NVML_DOWN_JUDGES``) says while NVML is
    unusable; ``down`` says why (``LibraryNotFound``)."""
    return Finding.skip("node", f"NVML unavailable ({down}): see gpu.responsive").replace(
        check=check_id)


def specs(entries: Iterable[Entry]) -> list[CheckSpec]:
    """The registered specs of ``entries``, importing only their modules: the prolog
    re-running nccl.acs loads ``checks/nccl/pcie.py``, not the NCCL family's other six."""
    wanted = list(entries)
    for module in sorted({e.module for e in wanted if e.family in FAMILIES}):
        importlib.import_module(f"{PACKAGE}.{module}")
    from .registry import REGISTRY  # the modules just imported registered there

    return [REGISTRY[e.id] for e in wanted]


def load_all() -> None:
    """Import every module of every family, registering all its checks."""
    for family in FAMILIES:
        package = importlib.import_module(f"{PACKAGE}.{family}")
        for module in package.MODULES:
            importlib.import_module(f"{PACKAGE}.{family}.{module}")
