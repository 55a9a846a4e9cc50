"""The offline bundles' lock (deploy/bundle/requirements.lock) and how the builder reads it:
every target gets exact versions with digests, nothing the project needs is left out, and
the builder says in one line when what it runs on lacks ``packaging``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from dev import bundle_lock
from tests.conftest import REPO

BUILD = REPO / "deploy/bundle/build.py"
DIGEST = "0" * 63 + "1"


@pytest.fixture(scope="module")
def build() -> ModuleType:
    return bundle_lock.builder()


def _dependencies() -> list[Requirement]:
    """pyproject's [project] dependencies, read without tomllib (3.11+)."""
    text = (REPO / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S)
    assert block is not None
    return [Requirement(line) for line in re.findall(r'"([^"]+)"', block[1])]


def test_the_lock_pins_every_dependency_with_digests_on_every_target(build: ModuleType) -> None:
    lock = build.read_lock()
    for python in build.PYTHONS:
        for arch in build.ARCHES:
            pins = {p.name: p for p in build.pins_for(lock, python, arch)}
            assert len(pins) == len(build.pins_for(lock, python, arch)), (python, arch)
            for req in [*_dependencies(), Requirement("pip")]:
                pin = pins.get(canonicalize_name(req.name))
                assert pin is not None, (req, python, arch)
                assert req.specifier.contains(pin.version), (req, pin, python, arch)
                assert pin.hashes, pin
    # a requirement only 3.10 has (aiohttp's async-timeout) is pinned for 3.10 only
    assert "async-timeout" in {p.name for p in build.pins_for(lock, "3.10", "x86_64")}
    assert "async-timeout" not in {p.name for p in build.pins_for(lock, "3.12", "aarch64")}


def test_markers_name_exactly_the_targets_that_need_a_pin(build: ModuleType,
                                                          tmp_path: Path) -> None:
    pythons, arches = build.PYTHONS, build.ARCHES
    every = {(p, a) for p in pythons for a in arches}
    assert bundle_lock.marker(every, pythons, arches) is None
    some = {("3.10", "x86_64"), ("3.10", "aarch64"), ("3.13", "aarch64")}
    lock = tmp_path / "requirements.lock"
    lock.write_text(build.Pin("x", "1.0", bundle_lock.marker(some, pythons, arches),
                              (DIGEST,)).line())
    pins = build.read_lock(lock)
    for python, arch in every:
        assert bool(build.pins_for(pins, python, arch)) == ((python, arch) in some)


def test_a_lock_without_exact_versions_and_digests_is_refused(build: ModuleType,
                                                              tmp_path: Path) -> None:
    lock = tmp_path / "requirements.lock"
    good = f"pyyaml==6.0.2 \\\n    --hash=sha256:{DIGEST}\n"
    lock.write_text(f"# a comment\n{good}")
    (pin,) = build.read_lock(lock)
    assert (pin.name, pin.version, pin.hashes) == ("pyyaml", "6.0.2", (DIGEST,))
    for bad in ("pyyaml>=6 --hash=sha256:" + DIGEST, "pyyaml==6.0.2",
                "pyyaml==6.0.2 --hash=md5:abc"):
        lock.write_text(bad + "\n")
        with pytest.raises(build.BuildError, match=r"dev\.bundle_lock"):
            build.read_lock(lock)


def test_without_packaging_the_builder_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    """-S leaves site-packages (where packaging lives) off the path, as a Python that only
    has the standard library would."""
    proc = subprocess.run([sys.executable, "-S", str(BUILD), "--out", str(tmp_path)],
                          capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert "'packaging'" in line
    assert "pip install -e '.[test]'" in line
    assert list(tmp_path.iterdir()) == []
