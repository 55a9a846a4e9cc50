"""The generated check manifest (checks/manifest.py) says what the registry says: the
prolog plans and the config is validated from it without importing the catalog."""

from __future__ import annotations

from pathlib import Path

from clusterdiag.checks import REGISTRY, index


def test_the_manifest_is_fresh() -> None:
    committed = (Path(index.__file__).with_name(index.MANIFEST)).read_text()
    assert committed == index.render(REGISTRY), (
        f"checks/manifest.py is stale (a check was added or changed): run `{index.COMMAND}` "
        "and commit the result")


def test_the_manifests_plan_is_the_registrys() -> None:
    """Levels, modes and flags as the specs have them, for every check."""
    for check_id, spec in REGISTRY.items():
        entry = index.ENTRIES[check_id]
        assert (entry.levels, entry.skip_in, entry.privileged, entry.needs, entry.params) == (
            spec.levels, spec.skip_in, spec.privileged, spec.needs, spec.params), check_id


def test_specs_imports_only_the_families_it_is_asked_for() -> None:
    import json
    import subprocess
    import sys

    code = ("import json, sys; from clusterdiag.checks import index; "
            "index.specs([index.ENTRIES['host.disk']]); "
            "print(json.dumps(sorted(m for m in sys.modules "
            "if m.startswith('clusterdiag.checks'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    families = {m.rsplit(".", 1)[-1] for m in json.loads(proc.stdout)}
    assert "host" in families
    assert {"gpu", "nvlink", "ib", "nccl", "fabric"} & families == set()


def test_the_plan_skips_with_the_reasons_a_person_reads() -> None:
    run, skipped = index.plan(["gpu.*", "host.disk"], {"host.disk": False}, "quick",
                              "prolog")
    assert "host.disk" not in {e.id for e in run}
    reasons = {f.check: f.message for f in skipped}
    assert reasons["host.disk"] == "disabled in config"
    assert all(e.id.startswith("gpu.") for e in run)
