"""Build the offline bundles: one tarball per Python minor version and architecture that
installs clusterdiag on a node with no network.

    python deploy/bundle/build.py                          # this Python, this machine
    python deploy/bundle/build.py --python 3.10 --arch aarch64 --out dist/
    python deploy/bundle/build.py --all                    # 3.10-3.13 x x86_64, aarch64

Each bundle holds the project's wheel, every dependency's wheel for that Python and
architecture, pip's own wheel (the node's Python may lack ensurepip), the unit, the default
config, the Slurm wrapper, the installer and a SHA-256 manifest of all of it. Wheels for
another architecture or Python are fetched for their platform (``pip download --platform
... --only-binary=:all:``) and never run here, so one x86_64 build machine makes the
aarch64 (Grace) bundles too. This needs the package index; installing the bundle does not.

Every dependency comes from ``requirements.lock`` beside this script: exact versions and
the SHA-256 of every wheel (``pip download --require-hashes``), so two builds of one commit
put the same dependency wheels in their bundles, whenever they run. ``python -m
dev.bundle_lock`` regenerates the lock after pyproject's dependencies change. Each bundle
carries ``requirements.txt``, its target's pins and the project wheel's digest, which the
installer hands to ``pip install --no-index --require-hashes``.

Run it from the development venv (``pip install -e '.[test]'``): it uses ``packaging``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import NamedTuple

try:
    from packaging.markers import Marker  # the test extra
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
except ImportError as _missing:
    # A configuration error (exit 2, docs/design.md §3), in one line: no traceback.
    print(f"build.py: the Python module {_missing.name!r} is missing from {sys.executable}: "
          "run this from the development venv (.venv/bin/pip install -e '.[test]')",
          file=sys.stderr)
    sys.exit(2)

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
ARCHES = ("x86_64", "aarch64")
# manylinux2014 is glibc 2.17: DGX OS, Ubuntu 20.04+, RHEL 8+ and Grace's Ubuntu all run it.
PLATFORM = "manylinux2014_{arch}"
SYSTEMD_FILES = ("clusterdiag-agent.service", "config.yaml", "clusterdiag-slurm.sh")
INSTALLER_FILES = ("install.sh", "install.py")
MANIFEST = "SHA256SUMS"
LOCK = HERE / "requirements.lock"
REQUIREMENTS = "requirements.txt"  # in the bundle: what the installer installs, hashed
WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?"
                        r"-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl$")


class BuildError(Exception):
    """A step of the build failed; the message says which and why."""


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        # pip's own summary ends its output; the builder's error comes before it
        tail = "\n".join(proc.stderr.strip().splitlines()[-12:])
        raise BuildError(f"pip {args[0]} failed:\n{tail}")


# What the project's wheel is built from (pyproject's packages and their data, its readme
# and licence).
WHEEL_SOURCES = ("agent", "checks", "reports", "pyproject.toml", "README.md", "LICENSE")


def _private_source(work: Path) -> Path:
    """A copy of the sources the wheel is built from. setuptools builds inside the tree it
    is given (build/, *.egg-info): building the checkout itself would race any other build
    of it and take in what an earlier one left there."""
    source = work / "source"
    for name in WHEEL_SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, source / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        elif path.is_file():
            shutil.copy2(path, source / name)
    return source


def project_wheel(work: Path) -> Path:
    """The project's own wheel, built once: it is pure Python, the same for every bundle."""
    _pip("wheel", "-q", "--no-deps", "-w", str(work), str(_private_source(work)))
    (wheel,) = work.glob("clusterdiag-*.whl")
    return wheel


def wheel_fits(filename: str, python: str, arch: str) -> bool:
    """Whether a wheel installs on CPython ``python`` on ``arch`` Linux: pure, abi3 or
    this minor's own ABI, for any or this architecture's Linux."""
    match = WHEEL_NAME.match(filename)
    if match is None:
        return False
    tag = "cp" + python.replace(".", "")
    pythons = match["py"].split(".")
    abis = match["abi"].split(".")
    plats = match["plat"].split(".")
    if "any" in plats:
        return any(p.startswith("py3") or p == tag for p in pythons)
    if not any(p.endswith(f"_{arch}") and p.startswith(("manylinux", "linux")) for p in plats):
        return False
    return tag in abis or ("abi3" in abis and any(p.startswith("cp3") for p in pythons))


def _download(python: str, arch: str, dest: Path, *specs: str) -> None:
    minor = python.replace(".", "")
    _pip("download", "-q", "--only-binary=:all:", "--platform", PLATFORM.format(arch=arch),
         "--python-version", python, "--implementation", "cp", "--abi", f"cp{minor}",
         "-d", str(dest), *specs)


def _target_markers(python: str, arch: str) -> dict[str, str]:
    return {"python_version": python, "python_full_version": f"{python}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "platform_machine": arch, "sys_platform": "linux", "platform_system": "Linux",
            "os_name": "posix", "extra": ""}


def _requirements(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as archive:
        meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        headers = Parser().parsestr(archive.read(meta).decode())
    return [Requirement(line) for line in headers.get_all("Requires-Dist") or []]


def missing_requirements(dest: Path, python: str, arch: str) -> list[str]:
    """Requirements of the fetched wheels that no fetched wheel meets on the target.
    ``pip download --python-version`` judges markers such as ``python_version < "3.11"``
    against the Python that runs it, so a 3.10 bundle built on 3.11 would miss them."""
    have: dict[str, str] = {}
    for wheel in dest.glob("*.whl"):
        match = WHEEL_NAME.match(wheel.name)
        if match:
            have[canonicalize_name(match["name"])] = match["version"]
    markers = _target_markers(python, arch)
    missing = []
    for wheel in dest.glob("*.whl"):
        for req in _requirements(wheel):
            if req.marker is not None and not req.marker.evaluate(markers):
                continue
            version = have.get(canonicalize_name(req.name))
            if version is None or not req.specifier.contains(version, prereleases=True):
                missing.append(f"{req.name}{req.specifier}")
    return sorted(set(missing))


class Pin(NamedTuple):
    """One entry of the lock: an exact version, where it applies, its wheels' digests. (A
    named tuple: this script is also loaded by path, outside sys.modules, where a dataclass
    cannot resolve its annotations.)"""

    name: str
    version: str
    marker: str | None
    hashes: tuple[str, ...]

    def line(self) -> str:
        """In pip's requirements-file form (``--hash=sha256:`` options, ``\\``
        continuations: pip's "Secure installs" and "Requirements File Format" docs)."""
        where = f" ; {self.marker}" if self.marker else ""
        return f"{self.name}=={self.version}{where}" + "".join(
            f" \\\n    --hash=sha256:{digest}" for digest in self.hashes) + "\n"


_DIGEST = re.compile(r"sha256:([0-9a-f]{64})")
_COMMENT = re.compile(r"(^|\s)#.*")  # pip: a comment starts a line or follows whitespace


def read_lock(path: Path = LOCK) -> list[Pin]:
    """The pins of a lock written by ``python -m dev.bundle_lock``; anything else in it
    (a range, a pin without a digest) is refused, since it would let a build differ."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise BuildError(f"{path}: {exc.strerror}; python -m dev.bundle_lock writes it") from None
    pins = []
    for entry in text.replace("\\\n", " ").splitlines():
        spec, *options = _COMMENT.sub("", entry).split(" --hash=")
        if not spec.strip():
            continue
        digests = [_DIGEST.fullmatch(option.strip()) for option in options]
        try:
            req = Requirement(spec)
        except InvalidRequirement as exc:
            raise BuildError(f"{path}: {spec.strip()!r}: {exc}") from None
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if len(exact) != 1 or len(req.specifier) != 1 or not digests or None in digests:
            raise BuildError(f"{path}: {spec.strip()!r}: not one ==version with its sha256 "
                             "digests; regenerate it with python -m dev.bundle_lock")
        pins.append(Pin(canonicalize_name(req.name), exact[0],
                        str(req.marker) if req.marker else None,
                        tuple(d[1] for d in digests if d is not None)))
    return pins


def pins_for(pins: list[Pin], python: str, arch: str) -> list[Pin]:
    """The pins that apply on CPython ``python`` on ``arch``, their markers judged for that
    target (not for the Python running the build), without the markers."""
    markers = _target_markers(python, arch)
    return [Pin(p.name, p.version, None, p.hashes) for p in pins
            if p.marker is None or Marker(p.marker).evaluate(markers)]


def resolve_wheels(project: Path, python: str, arch: str, dest: Path) -> list[Path]:
    """The newest wheels of everything the project needs on that target, plus pip's: what
    the lock is made from (python -m dev.bundle_lock), never what a bundle ships."""
    dest.mkdir(parents=True)
    _download(python, arch, dest, str(project), "pip")
    for _ in range(10):  # each round fetches what the previous one's wheels require
        missing = missing_requirements(dest, python, arch)
        if not missing:
            break
        _download(python, arch, dest, *missing)
    else:
        raise BuildError(f"requirements still unmet: {', '.join(missing)}")
    return sorted(dest.glob("*.whl"))


def fetch_wheels(project: Path, python: str, arch: str, dest: Path,
                 pins: list[Pin]) -> list[Path]:
    """The project's wheel and exactly the locked wheels for that Python and architecture,
    each checked against its digest by pip (``--require-hashes``)."""
    dest.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="clusterdiag-lock-") as tmp:
        locked = Path(tmp) / "locked.txt"
        locked.write_text("".join(pin.line() for pin in pins))
        _download(python, arch, dest, "--no-deps", "--require-hashes", "-r", str(locked))
    shutil.copy2(project, dest / project.name)
    missing = missing_requirements(dest, python, arch)
    if missing:
        raise BuildError(f"{LOCK.name} lacks {', '.join(missing)} for CPython {python} on "
                         f"{arch}: regenerate it with python -m dev.bundle_lock")
    wheels = sorted(dest.glob("*.whl"))
    wrong = [w.name for w in wheels if not wheel_fits(w.name, python, arch)]
    if wrong:
        raise BuildError(f"wheels that do not fit CPython {python} on {arch}: "
                         + ", ".join(wrong))
    if not any(w.name.startswith("pip-") for w in wheels):
        raise BuildError(f"{LOCK.name} holds no pip for CPython {python} on {arch}")
    return wheels


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(top: Path) -> str:
    """``sha256sum -c`` format over every file of the bundle; returns its own digest."""
    lines = [f"{sha256(p)}  {p.relative_to(top).as_posix()}"
             for p in sorted(top.rglob("*")) if p.is_file() and p.name != MANIFEST]
    (top / MANIFEST).write_text("\n".join(lines) + "\n")
    return sha256(top / MANIFEST)


def _version_of(wheel: Path) -> str:
    match = WHEEL_NAME.match(wheel.name)
    if match is None:
        raise BuildError(f"not a wheel name: {wheel.name}")
    return match["version"]


def build_bundle(project: Path, python: str, arch: str, out: Path, lock: list[Pin]) -> Path:
    version = _version_of(project)
    name = f"clusterdiag-{version}-py{python.replace('.', '')}-{arch}"
    pins = pins_for(lock, python, arch)
    with tempfile.TemporaryDirectory(prefix="clusterdiag-bundle-") as tmp:
        top = Path(tmp) / name
        wheels = fetch_wheels(project, python, arch, top / "wheels", pins)
        own = Pin("clusterdiag", version, None, (sha256(project),))
        (top / REQUIREMENTS).write_text("".join(pin.line() for pin in [own, *pins]))
        for file in SYSTEMD_FILES:
            shutil.copy2(REPO / "systemd" / file, top / file)
        for file in INSTALLER_FILES:
            shutil.copy2(HERE / file, top / file)
        (top / "bundle.json").write_text(json.dumps({
            "name": "clusterdiag", "version": version, "python": python, "arch": arch,
            "wheels": [w.name for w in wheels]}, indent=2) + "\n")
        write_manifest(top)
        out.mkdir(parents=True, exist_ok=True)
        target = out / f"{name}.tar.gz"
        with tarfile.open(target, "w:gz") as tar:
            tar.add(top, arcname=name)
    return target


def _arguments(argv: list[str]) -> argparse.Namespace:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", action="append", choices=PYTHONS,
                        help=f"Python minor version (repeatable; default {here})")
    parser.add_argument("--arch", action="append", choices=ARCHES,
                        help=f"architecture (repeatable; default {platform.machine()})")
    parser.add_argument("--all", action="store_true", help="every supported version and arch")
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="default: dist/")
    args = parser.parse_args(argv)
    if args.all:
        args.python, args.arch = list(PYTHONS), list(ARCHES)
    args.python = args.python or [here]
    args.arch = args.arch or [platform.machine()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(sys.argv[1:] if argv is None else argv)
    try:
        with tempfile.TemporaryDirectory(prefix="clusterdiag-wheel-") as work:
            lock = read_lock()
            project = project_wheel(Path(work))
            for python in args.python:
                for arch in args.arch:
                    target = build_bundle(project, python, arch, args.out, lock)
                    size = target.stat().st_size / 1e6
                    print(f"{target}  {size:.1f} MB  sha256 {sha256(target)}")
    except BuildError as exc:
        print(f"build.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
