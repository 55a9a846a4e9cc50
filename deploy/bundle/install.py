"""Install, upgrade or uninstall clusterdiag from an offline bundle, with the node's own
Python and nothing from the network. Run through ``install.sh``, which picks the Python of
the bundle's minor version:

    ./install.sh                 # install, or upgrade what is installed
    ./install.sh uninstall       # remove the program; keep config and state

Layout (defaults; every path can be moved with a flag, and the unit, the Slurm wrapper and
a newly written config name the paths given, never the defaults):

    /opt/clusterdiag/versions/<version>-py<XY>-<manifest digest>/   a venv per bundle
    /opt/clusterdiag/current -> versions/...     switched atomically (rename of a link)
    /opt/clusterdiag/install.json                what was installed where (for uninstall)
    /usr/local/bin/clusterdiag -> /opt/clusterdiag/current/bin/clusterdiag
    /etc/systemd/system/clusterdiag-agent.service
    /etc/clusterdiag/config.yaml                 written only when there is none
    /etc/slurm/clusterdiag-{prolog,epilog,healthcheck}.sh -> the wrapper in current
    /var/lib/clusterdiag                         the agent's state (config agent.state_dir)

The venv is made ``--without-pip`` (Debian and Ubuntu ship ``venv`` without ``ensurepip``
unless python3-venv is installed) and pip comes from the bundle's own wheel, run straight
from the wheel file, with ``--no-index --require-hashes``: only the bundle's wheels, each
with the digest its ``requirements.txt`` (the build's lock) gives. A version directory is
complete only once its marker is written, so an install that dies half way leaves
``current`` on the old version and is redone next time. Upgrading keeps the previous
version (for a rollback by relinking ``current``) and removes older ones. Neither upgrade
nor uninstall touches the config or the agent's state (/var/lib/clusterdiag).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MANIFEST = "SHA256SUMS"
COMPLETE = ".complete"
UNIT = "clusterdiag-agent.service"
WRAPPER = "clusterdiag-slurm.sh"
HOOKS = ("prolog", "epilog", "healthcheck")
SHARE = Path("share/clusterdiag")
LIBEXEC = Path("libexec")  # the wrapper as installed, naming this install's paths
REQUIREMENTS = "requirements.txt"
# The defaults the shipped files name (systemd/clusterdiag-agent.service ExecStart=,
# systemd/clusterdiag-slurm.sh, systemd/config.yaml), replaced by the paths given.
DEFAULT_PROGRAM = "/usr/local/bin/clusterdiag"
DEFAULT_CONFIG = "/etc/clusterdiag/config.yaml"
DEFAULT_PROFILES = "/etc/clusterdiag/profiles"
DEFAULT_STATE = Path("/var/lib/clusterdiag")
# systemd.unit(5) "Unit File Load Path": StateDirectory= names a directory under /var/lib
# (systemd.exec(5) "RuntimeDirectory=, StateDirectory=, ...": relative paths only).
STATE_ROOT = Path("/var/lib")
# The system unit directories of systemd.unit(5)'s load path: only a unit there is
# systemd's, so only then does install reload systemd and restart the agent.
SYSTEM_UNIT_DIRS = tuple(Path(d) for d in ("/etc/systemd/system", "/run/systemd/system",
                                           "/usr/local/lib/systemd/system",
                                           "/usr/lib/systemd/system", "/lib/systemd/system"))
# What a path written into the unit (space-separated lists, % specifiers: systemd.unit(5)
# "Specifiers") and the shell wrapper may hold.
PLAIN_PATH = re.compile(r"/[A-Za-z0-9._+@/-]*")


class InstallError(Exception):
    """What stops the install, in one line: printed, exit 2 (nothing was switched)."""


@dataclass
class Paths:
    prefix: Path
    bin_dir: Path
    config_dir: Path
    unit_dir: Path
    slurm_dir: Path | None
    state_dir: Path = DEFAULT_STATE

    @property
    def program(self) -> Path:
        return self.bin_dir / "clusterdiag"

    @property
    def config(self) -> Path:
        return self.config_dir / "config.yaml"

    @property
    def current(self) -> Path:
        return self.prefix / "current"

    @property
    def record(self) -> Path:
        return self.prefix / "install.json"


def say(message: str) -> None:
    print(f"clusterdiag install: {message}", flush=True)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_manifest(bundle: Path) -> str:
    """Every file the manifest lists has its digest; returns the manifest's own digest,
    which names the version directory (the same bundle always lands in the same one)."""
    manifest = bundle / MANIFEST
    if not manifest.is_file():
        raise InstallError(f"{manifest}: missing; this is not a complete bundle")
    for number, line in enumerate(manifest.read_text().splitlines(), 1):
        digest, sep, name = line.partition("  ")
        path = bundle / name
        if not sep or "/.." in f"/{name}" or name.startswith("/"):
            raise InstallError(f"{manifest}:{number}: not a manifest line")
        if not path.is_file():
            raise InstallError(f"{path}: listed in {MANIFEST} but missing")
        if sha256(path) != digest:
            raise InstallError(f"{path}: SHA-256 differs from {MANIFEST}; the bundle is damaged")
    return sha256(manifest)


def read_bundle(bundle: Path) -> dict[str, str]:
    meta = json.loads((bundle / "bundle.json").read_text())
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if meta["python"] != here:
        raise InstallError(f"this bundle is for Python {meta['python']}, {sys.executable} is "
                           f"{here}: use the bundle built for {here}, or pass --python")
    if meta["arch"] != platform.machine():
        raise InstallError(f"this bundle is for {meta['arch']}, this machine is "
                           f"{platform.machine()}")
    return {key: str(meta[key]) for key in ("version", "python", "arch")}


def clean_environment() -> dict[str, str]:
    """pip must not read the node's index, constraints or find-links settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON"))}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, env=clean_environment(),
                          check=False)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise InstallError(f"{what} failed (exit {proc.returncode}): {tail}")


def build_version(bundle: Path, meta: dict[str, str], target: Path) -> None:
    """A venv on this Python with clusterdiag and its dependencies from the bundle only."""
    if target.exists():
        shutil.rmtree(target)  # an earlier install died before its marker
    target.parent.mkdir(parents=True, exist_ok=True)
    run([sys.executable, "-m", "venv", "--without-pip", str(target)], "creating the venv")
    wheels = bundle / "wheels"
    (pip_wheel,) = wheels.glob("pip-*.whl")
    run([str(target / "bin" / "python"), str(pip_wheel / "pip"), "install", "-q",
         "--no-index", "--find-links", str(wheels), "--only-binary=:all:", "--no-cache-dir",
         "--disable-pip-version-check", "--require-hashes", "-r", str(bundle / REQUIREMENTS)],
        "installing the wheels")
    share = target / SHARE
    share.mkdir(parents=True)
    for name in (UNIT, "config.yaml", WRAPPER, "install.sh", "install.py", MANIFEST,
                 "bundle.json", REQUIREMENTS):
        shutil.copy2(bundle / name, share / name)
    (target / COMPLETE).write_text(meta["version"] + "\n")


def replace_link(link: Path, target: str | Path) -> None:
    """Point ``link`` at ``target`` in one rename: a reader sees the old or the new."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists() and not link.is_symlink():
        raise InstallError(f"{link} exists and is not a link: move it away first")
    staged = link.with_name(f".{link.name}.new")
    if staged.is_symlink() or staged.exists():
        staged.unlink()
    staged.symlink_to(target)
    os.replace(staged, link)


def systemd_running() -> bool:
    return Path("/run/systemd/system").is_dir()


def manages_unit(paths: Paths) -> bool:
    """Whether systemd runs this machine and loads the unit from where it was put."""
    return systemd_running() and paths.unit_dir in SYSTEM_UNIT_DIRS


def check_paths(paths: Paths) -> None:
    """Every path written into the unit or the wrapper is one word with no specifier."""
    for path in (paths.program, paths.config, paths.state_dir):
        if not PLAIN_PATH.fullmatch(str(path)):
            raise InstallError(f"{path}: only letters, digits and ._+@/- can be written into "
                               "the unit and the Slurm wrapper; choose another path")


def _substitute(text: str, old: str, new: str, where: str) -> str:
    """``old`` replaced, where the shipped file names it exactly once."""
    if text.count(old) != 1:
        raise InstallError(f"{where} does not name {old} exactly once; the bundle is damaged")
    return text.replace(old, new)


def render_unit(text: str, paths: Paths) -> str:
    """The unit running this install's program with its config; the agent's state
    directory writable under ProtectSystem=strict (systemd.exec(5)): StateDirectory=
    below /var/lib, which systemd creates for the unit's user, else ReadWritePaths=."""
    exec_start = next((ln for ln in text.splitlines() if ln.startswith("ExecStart=")), "")
    rendered = _substitute(exec_start, DEFAULT_PROGRAM, str(paths.program), f"{UNIT} ExecStart=")
    rendered = _substitute(rendered, DEFAULT_CONFIG, str(paths.config), f"{UNIT} ExecStart=")
    text = text.replace(exec_start, rendered)
    if paths.state_dir == DEFAULT_STATE:
        return text
    default = f"StateDirectory={DEFAULT_STATE.relative_to(STATE_ROOT)}\n"
    if paths.state_dir.is_relative_to(STATE_ROOT):
        moved = f"StateDirectory={paths.state_dir.relative_to(STATE_ROOT)}\n"
    else:
        moved = f"ReadWritePaths={paths.state_dir}\n"
    return _substitute(text, default, moved, UNIT)


def render_wrapper(text: str, paths: Paths) -> str:
    """The Slurm wrapper running this install's program with its config."""
    text = _substitute(text, f"${{CLUSTERDIAG:-{DEFAULT_PROGRAM}}}",
                       f"${{CLUSTERDIAG:-{paths.program}}}", WRAPPER)
    return _substitute(text, f"${{CLUSTERDIAG_CONFIG:-{DEFAULT_CONFIG}}}",
                       f"${{CLUSTERDIAG_CONFIG:-{paths.config}}}", WRAPPER)


def render_config(text: str, paths: Paths) -> str:
    """The default config with this install's site profiles and agent state directory
    (the agent and the Slurm programs both read agent.state_dir from it)."""
    text = _substitute(text, f"profile_dir: {DEFAULT_PROFILES}",
                       f"profile_dir: {paths.config_dir / 'profiles'}", "config.yaml")
    return _substitute(text, f"state_dir: {DEFAULT_STATE}", f"state_dir: {paths.state_dir}",
                       "config.yaml")


def write_file(path: Path, text: str, mode: int = 0o644) -> None:
    """``path`` replaced in one rename: a prolog starting meanwhile reads old or new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    staged = path.with_name(f".{path.name}.new")
    staged.write_text(text)
    staged.chmod(mode)
    os.replace(staged, path)


def systemctl(*args: str) -> None:
    subprocess.run(["systemctl", *args], capture_output=True, check=False, timeout=60)


def ensure_user() -> None:
    """The unit runs as ``clusterdiag`` (User=), in group video for /dev/nvidia*."""
    known = subprocess.run(["getent", "passwd", "clusterdiag"], capture_output=True,
                           check=False)
    if known.returncode == 0:
        return
    run(["useradd", "--system", "--user-group", "--no-create-home", "--home-dir",
         "/var/lib/clusterdiag", "--shell", "/usr/sbin/nologin", "clusterdiag"],
        "creating the clusterdiag user")


def make_state_dir(paths: Paths, create_user: bool) -> None:
    """A state directory outside /var/lib must exist before the unit starts (systemd.exec(5):
    a missing ReadWritePaths= entry fails it) and belong to the unit's user; one below
    /var/lib is StateDirectory=, which systemd makes itself."""
    state = paths.state_dir
    if state.is_relative_to(STATE_ROOT) or state.exists():
        return
    state.mkdir(mode=0o750, parents=True)
    if create_user:
        shutil.chown(state, "clusterdiag", "clusterdiag")
    say(f"made the state directory {state}")


def install_files(paths: Paths, share: Path) -> list[str]:
    """Unit, config (only when absent), Slurm links; returns what uninstall may remove."""
    made: list[str] = []
    unit = paths.unit_dir / UNIT
    write_file(unit, render_unit((share / UNIT).read_text(), paths))
    made.append(str(unit))
    config = paths.config
    if config.exists():
        say(f"kept {config}; the default is {share / 'config.yaml'}")
    else:
        write_file(config, render_config((share / "config.yaml").read_text(), paths))
        say(f"wrote the default {config}")
    if paths.slurm_dir is not None:
        wrapper = paths.current / LIBEXEC / WRAPPER
        for hook in HOOKS:
            link = paths.slurm_dir / f"clusterdiag-{hook}.sh"
            replace_link(link, wrapper)
            made.append(str(link))
    return made


def prune(versions: Path, keep: set[str]) -> None:
    """Only the new version and the one it replaced stay (a rollback is one relink)."""
    for entry in versions.iterdir():
        if entry.is_dir() and entry.name not in keep:
            shutil.rmtree(entry, ignore_errors=True)


def install(bundle: Path, paths: Paths, create_user: bool) -> int:
    check_paths(paths)
    meta = read_bundle(bundle)
    digest = verify_manifest(bundle)
    name = f"{meta['version']}-py{meta['python'].replace('.', '')}-{digest[:12]}"
    target = paths.prefix / "versions" / name
    previous = os.readlink(paths.current) if paths.current.is_symlink() else None
    if (target / COMPLETE).exists():
        say(f"{target} is already built from this bundle")
    else:
        say(f"building {target}")
        build_version(bundle, meta, target)
    share = target / SHARE
    write_file(target / LIBEXEC / WRAPPER, render_wrapper((share / WRAPPER).read_text(), paths),
               0o755)
    if create_user:
        ensure_user()
    make_state_dir(paths, create_user)
    replace_link(paths.current, Path("versions") / name)
    replace_link(paths.bin_dir / "clusterdiag", paths.current / "bin" / "clusterdiag")
    made = install_files(paths, paths.current / SHARE)
    made.append(str(paths.bin_dir / "clusterdiag"))
    paths.record.write_text(json.dumps({
        "version": meta["version"], "current": name, "files": made,
        "config_dir": str(paths.config_dir), "state_dir": str(paths.state_dir),
        "unit_dir": str(paths.unit_dir)}, indent=2) + "\n")
    if manages_unit(paths):
        systemctl("daemon-reload")
        systemctl("try-restart", UNIT)  # an upgrade restarts a running agent, no more
    prune(paths.prefix / "versions", {name, Path(previous or "").name})
    say(f"clusterdiag {meta['version']} is {paths.current} -> versions/{name}"
        + (f" (was {Path(previous).name})" if previous and Path(previous).name != name else ""))
    return 0


def uninstall(paths: Paths) -> int:
    """Remove what install recorded; the config and the agent's state stay."""
    if not paths.record.is_file():
        say(f"nothing to uninstall: {paths.record} does not exist")
        return 0
    record = json.loads(paths.record.read_text())
    paths.unit_dir = Path(record.get("unit_dir", paths.unit_dir))
    if manages_unit(paths):
        systemctl("disable", "--now", UNIT)
    for name in record["files"]:
        path = Path(name)
        if path.is_symlink() or path.is_file():
            path.unlink()
    if manages_unit(paths):
        systemctl("daemon-reload")
    shutil.rmtree(paths.prefix)
    say(f"removed {paths.prefix}; kept {record['config_dir']} and "
        f"{record.get('state_dir', DEFAULT_STATE)}")
    return 0


def _arguments(argv: list[str]) -> tuple[str, Paths, bool]:
    parser = argparse.ArgumentParser(prog="install.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("action", nargs="?", choices=("install", "uninstall"),
                        default="install")
    parser.add_argument("--prefix", type=Path, default=Path("/opt/clusterdiag"))
    parser.add_argument("--bin-dir", type=Path, default=Path("/usr/local/bin"))
    parser.add_argument("--config-dir", type=Path, default=Path("/etc/clusterdiag"))
    parser.add_argument("--unit-dir", type=Path, default=Path("/etc/systemd/system"))
    parser.add_argument("--slurm-dir", type=Path, default=Path("/etc/slurm"),
                        help="where the prolog/epilog/healthcheck links go")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE,
                        help="the agent's state (written into a new config and the unit)")
    parser.add_argument("--no-slurm", action="store_true", help="install no Slurm links")
    parser.add_argument("--no-user", action="store_true",
                        help="do not create the clusterdiag system user")
    args = parser.parse_args(argv)
    paths = Paths(args.prefix.absolute(), args.bin_dir.absolute(), args.config_dir.absolute(),
                  args.unit_dir.absolute(), None if args.no_slurm else args.slurm_dir.absolute(),
                  args.state_dir.absolute())
    return args.action, paths, not args.no_user


def main(argv: list[str] | None = None) -> int:
    action, paths, create_user = _arguments(sys.argv[1:] if argv is None else argv)
    try:
        if action == "uninstall":
            return uninstall(paths)
        return install(HERE, paths, create_user)
    except (InstallError, OSError) as exc:
        print(f"clusterdiag install: ERROR {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
