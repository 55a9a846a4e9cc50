"""The checkout's offline bundles for the wheel tests, built through deploy/bundle/build.py's
command line as an operator runs it, each at most once per test session.

A build is a private copy of the sources, the project wheel and a ``pip download`` per
bundle: tens of seconds. test_bundle.py installs the system Python's bundle in a machine and
test_bundle_install.py installs this Python's into a directory; where they are the same
bundle (the same minor version and architecture), one build serves both. The tests that use
it share the ``wheel`` xdist group, so one worker builds and the others never ask."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import REPO


def build(source: Path, out: Path, *args: str) -> list[Path]:
    """build.py from ``source`` into ``out``: one line per bundle on stdout, its path first
    (deploy/bundle/build.py, ``main``)."""
    proc = subprocess.run([sys.executable, str(source / "deploy/bundle/build.py"), "--out",
                           str(out), *args], capture_output=True, text=True, check=False,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    return [Path(line.split()[0]) for line in proc.stdout.splitlines()]


@dataclass
class Shelf:
    """The checkout's bundles built so far this session, by (Python minor, architecture)."""

    out: Path
    built: dict[tuple[str, str], Path] = field(default_factory=dict)

    def bundles(self, arch: str, *pythons: str) -> dict[str, Path]:
        """Each Python's bundle for ``arch``, by minor version. Those not built yet come
        from one build.py run, which builds the project wheel once for all of them."""
        missing = [p for p in dict.fromkeys(pythons) if (p, arch) not in self.built]
        if missing:
            paths = build(REPO, self.out, "--arch", arch,
                          *(arg for python in missing for arg in ("--python", python)))
            for python in missing:
                # build.py names each clusterdiag-VERSION-pyXY-ARCH.tar.gz (build_bundle)
                tail = f"-py{python.replace('.', '')}-{arch}.tar.gz"
                (self.built[python, arch],) = (p for p in paths if p.name.endswith(tail))
        return {python: self.built[python, arch] for python in pythons}
