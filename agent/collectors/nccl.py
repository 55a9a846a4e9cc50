"""What NCCL would find on this node: the library a job would load, its settings, the RDMA
ports and interfaces those settings name, and the host facts GPUDirect RDMA depends on.

NCCL lives in job containers as often as on the host, so finding no library is data, not
an error. Every file is read under ``env.root`` and the library is loaded through
``env.nccl_versions`` (a child process with a timeout), so a simulated node never reads
the machine it runs on.
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import time
from pathlib import Path

from ..model import SourceStats
from ..model.nccl import HcaPort, NcclInfo, NcclLibrary
from ..read.sources import SourceEnv
from ..read.sysfs import FileCounter, list_dir, read_text, under
from .nccl_host import read_gpudirect, read_iommu, read_limits

LIBRARY = "libnccl.so.2"
NCCL_CONF = "/etc/nccl.conf"
# The multiarch and classic directories ld.so searches when the cache has no answer.
_LINKER_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")
# pip wheels nvidia-nccl-cu12 / -cu13 (a namespace package without __init__.py).
_WHEEL_DIR = "nvidia/nccl/lib"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TOPO_LIMIT = 16 << 20


def version_string(code: int) -> str:
    """NCCL_VERSION_CODE to 2.21.5: X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def _ld_conf_dirs(root: Path, counter: FileCounter) -> list[str]:
    """Directories named in /etc/ld.so.conf and the files it includes, in order."""
    dirs: list[str] = []
    pending = [under(root, "/etc/ld.so.conf")]
    seen: set[Path] = set()
    while pending:
        path = pending.pop(0)
        if path in seen:
            continue
        seen.add(path)
        text, _ = read_text(path, counter)
        for line in (text or "").splitlines():
            line = line.split("#", 1)[0].strip()
            if line.startswith("include "):
                pattern = line.split(None, 1)[1]
                pending.extend(Path(p) for p in sorted(glob.glob(str(under(root, pattern)))))
            elif line.startswith("/"):
                dirs.append(line)
    return dirs


def find_libraries(env: SourceEnv, counter: FileCounter) -> list[NcclLibrary]:
    """Every libnccl.so.2 a job could load, in the order its dynamic linker would try."""
    found: list[NcclLibrary] = []
    seen: set[str] = set()

    def add(path: str, how: str) -> None:
        """``path`` as the node sees it; looked up under the root."""
        actual = under(env.root, path)
        if actual.is_file():
            key = os.path.realpath(actual)
            if key not in seen:
                seen.add(key)
                found.append(NcclLibrary(path, how))

    for directory in env.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if directory.startswith("/"):
            add(os.path.join(directory, LIBRARY), "LD_LIBRARY_PATH")
    for directory in [*_ld_conf_dirs(env.root, counter), *_LINKER_DIRS]:
        add(os.path.join(directory, LIBRARY), "linker path")
    if env.root != Path("/"):
        return found  # a captured tree: this process's cache and Python are not the node's
    cached = env.find_library("nccl")
    if not found and cached and cached.startswith("/"):
        add(cached, "ldconfig cache")
    for site in env.python_site_dirs():
        add(os.path.join(site, _WHEEL_DIR, LIBRARY), "python wheel")
    return found


def read_versions(env: SourceEnv, libraries: list[NcclLibrary], deadline: float) -> None:
    if not libraries:
        return
    left = deadline - time.monotonic()
    if left <= 0.2:
        for lib in libraries:
            lib.error = "no time left to load it"
        return
    paths = {lib.path: str(under(env.root, lib.path)) for lib in libraries}
    answers = env.nccl_versions(list(paths.values()), min(10.0, left - 0.1))
    for lib in libraries:
        code, error = answers.get(paths[lib.path], (None, "no answer"))
        lib.version = version_string(code) if code else None
        lib.error = error if code is None else None


def parse_env_file(text: str, shell: bool) -> dict[str, str]:
    """NCCL_* assignments. /etc/nccl.conf is read by NCCL itself (NAME=VALUE, no quoting);
    a site env file is shell syntax (``export``, quotes)."""
    settings: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if shell and line.startswith("export "):
            line = line[len("export "):].strip()
        name, value = (part.strip() for part in line.split("=", 1))
        if not _NAME.match(name) or not name.startswith("NCCL_"):
            continue
        if shell:
            try:
                words = shlex.split(value, comments=True)
            except ValueError:
                words = [value]
            value = " ".join(words)
        settings[name] = value
    return settings


def read_settings(env: SourceEnv, info: NcclInfo, counter: FileCounter) -> None:
    """Lowest precedence first: /etc/nccl.conf, the site env file, then the environment."""
    site = env.wants("nccl.env", "env_file")
    for path, shell in ((NCCL_CONF, False), *(((str(site), True),) if site else ())):
        text, reason = read_text(under(env.root, path), counter)
        if text is None:
            if reason != "missing" or path != NCCL_CONF:
                info.file_errors[path] = reason or "unreadable"
            continue
        info.files[path] = parse_env_file(text, shell)
    info.environ = {k: v for k, v in env.environ.items() if k.startswith("NCCL_")}
    for path, settings in info.files.items():
        for name, value in settings.items():
            info.env[name], info.env_sources[name] = value, path
    for name, value in info.environ.items():
        info.env[name], info.env_sources[name] = value, "environment"


def _all_values(info: NcclInfo, name: str) -> set[str]:
    values = {s[name] for s in info.files.values() if name in s}
    if name in info.environ:
        values.add(info.environ[name])
    return values


def read_ports(env: SourceEnv, info: NcclInfo, counter: FileCounter) -> None:
    gid_indexes = [v for v in _all_values(info, "NCCL_IB_GID_INDEX") if v.strip().isdecimal()]
    base = under(env.root, "/sys/class/infiniband")
    for dev in list_dir(base):
        for port in list_dir(base / dev / "ports"):
            pdir = base / dev / "ports" / port
            state, _ = read_text(pdir / "state", counter)
            layer, _ = read_text(pdir / "link_layer", counter)
            entry = HcaPort(state=state.split(":")[-1].strip() if state else None,
                            link_layer=layer)
            for index in gid_indexes:
                entry.gid, _ = read_text(pdir / "gids" / index.strip(), counter)
                entry.gid_type, _ = read_text(pdir / "gid_attrs/types" / index.strip(), counter)
            info.ports[f"{dev}/{port}"] = entry


def read_netdevs(env: SourceEnv, info: NcclInfo, counter: FileCounter) -> None:
    base = under(env.root, "/sys/class/net")
    for name in list_dir(base):
        state, _ = read_text(base / name / "operstate", counter)
        info.netdevs[name] = state or "unknown"


def read_topo_files(env: SourceEnv, info: NcclInfo, counter: FileCounter) -> None:
    values = sorted(_all_values(info, "NCCL_TOPO_FILE"))
    if not values:
        return
    import xml.etree.ElementTree as ET  # only with NCCL_TOPO_FILE set: not on every start

    for value in values:
        text, reason = read_text(under(env.root, value), counter, limit=_TOPO_LIMIT)
        if text is None:
            info.topo_files[value] = reason or "unreadable"
            continue
        try:
            ET.fromstring(text)
        except ET.ParseError as exc:
            info.topo_files[value] = f"not valid XML: {exc}"
        else:
            info.topo_files[value] = None


def collect(env: SourceEnv, stats: SourceStats, deadline: float) -> NcclInfo:
    counter = FileCounter()
    info = NcclInfo()
    info.libraries = find_libraries(env, counter)
    read_settings(env, info, counter)
    read_ports(env, info, counter)
    read_netdevs(env, info, counter)
    read_topo_files(env, info, counter)
    info.gpudirect = read_gpudirect(env.root, counter)
    info.iommu = read_iommu(env.root, counter)
    info.limits = read_limits(env.root, counter)
    if info.libraries:
        stats.calls += 1
        read_versions(env, info.libraries, deadline)
        first = info.libraries[0]
        info.library_path, info.version, info.error = first.path, first.version, first.error
    stats.files_read += counter.count
    return info
