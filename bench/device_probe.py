"""The check for a machine with real NVIDIA GPUs: build the real tools there, run clusterdiag
on the GPUs, and bring back what everything printed (docs/development.md, "Real tools").

    python3 bench/device_probe.py prepare [--carry .probe-carry]    # here, with network
    python3 bench/device_probe.py run --out DIR [--archive FILE]    # on the GPU machine
    python3 bench/device_probe.py nvml DIR                          # NVML's answers alone
    python3 bench/device_probe.py mask FILE|-                       # a JSON file, masked

``prepare`` fills the carry folder with what a GPU machine with no network needs beyond
the checkout: the tool sources (copied from ../shared/tools-src), the Python packages
clusterdiag needs as wheels for Python 3.10-3.13 (with setuptools and wheel, to build
clusterdiag itself), nvml.h's wheel (nvidia-nvml-dev) and Boost program_options as Debian
``.deb`` files (unpacked with ``dpkg -x`` into a private prefix where the machine has no
Boost). NCCL and cuBLAS are the machine's own (its PyTorch's nvidia-nccl-cu13 and
nvidia-cublas, or the CUDA toolkit's): the NCCL wheel is 200-350 MB.

The carry folder must travel with the checkout but never be committed: it is neither
tracked nor ignored (the device machine receives tracked files and untracked files git
does not ignore). ``git status`` lists it; do not add it. (Naming it in the device call's
``carry`` would do as well, if it were ignored.)

``run`` works within ``--limit-s`` (8 minutes) on a machine with nothing but the checkout
and the carry folder: it installs clusterdiag and what it lacks from the carried wheels
(``pip --no-index``) into a scratch folder put first on PYTHONPATH, builds the tools for
the GPU's architecture (``python -m dev.tools build``), records NVML's answers, runs
``clusterdiag snapshot``, ``clusterdiag run --level full`` and ``clusterdiag qualify
--via local --tests node`` (the tools reached through wrappers that keep a copy of what
each printed), each with its own time bound, masks serial numbers, UUIDs and GUIDs in
everything it writes, and writes a ``summary.json`` of what ran, how it ended and how long
it took. On a machine without a GPU every step runs the same way (the GPU steps then
record their no-GPU answers): that is how it is rehearsed before a GPU is lent.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CARRY = REPO / ".probe-carry"
SHARED_SRC = REPO.parent / "shared" / "tools-src"
QUALIFY_TOOLS = ("all_reduce_perf", "nvbandwidth", "gpu_burn", "gpu_burn_compare", "ib_write_bw",
                 "dcgmi", "ibstat")  # what the config's qualify.tools may name
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
BUILD_REQUIRES = ("setuptools>=68", "wheel")
EXTRA_WHEELS = ("nvidia-nvml-dev==13.0.*",)  # nvml.h for nvbandwidth (CUDA 13.0), 124 kB
BOOST = "libboost-program-options-dev"
LIMIT_MIB = 64


# -- masking ------------------------------------------------------------------------------

UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
SECRET_KEY = re.compile(r"serial|uuid|guid", re.IGNORECASE)
VPD_SECRETS = ("SN", "V3", "VU")  # serial number, Mellanox's UUID, its serial-bearing field


class Masker:
    """Replaces serial numbers, UUIDs and GUIDs with stand-ins of the same shape, the same
    value always by the same stand-in (so equal stays equal and distinct stays distinct):
    ``GPU-00000000-0000-0000-0000-000000000001``, ``MASKED0000002``."""

    def __init__(self) -> None:
        self.masks: dict[str, str] = {}

    def _token(self, value: str, serial: bool) -> str:
        if value in self.masks:
            return self.masks[value]
        if not re.sub(r"[0:x-]", "", value) or value.startswith("MASKED") \
                or value in self.masks.values():  # zeros hide nothing; masked already
            return value
        index = str(len(self.masks) + 1)
        if serial:
            body = "MASKED" + "0" * max(0, len(value) - 6)
        else:
            body = re.sub(r"[0-9a-fA-F]", "0", value)
            if body.startswith("0x"):
                body = "0x" + body[2:]
        masked = body[: len(body) - len(index)] + index if len(body) > len(index) else body
        self.masks[value] = masked
        if not serial and ":" in value:  # a GUID as sysfs writes it; ibstat prints 0x...
            self.masks.setdefault("0x" + value.replace(":", "").lower(),
                                  "0x" + masked.replace(":", ""))
        return masked

    def data(self, value: Any, key: str = "", vpd: bool = False) -> Any:
        """A JSON value with the secret fields masked, and every UUID-shaped string."""
        if isinstance(value, dict):
            return {k: self.data(v, str(k), vpd or str(k).lower() == "vpd")
                    for k, v in value.items()}
        if isinstance(value, list):
            return [self.data(v, key, vpd) for v in value]
        if isinstance(value, str) and value:
            if (vpd and key in VPD_SECRETS) or SECRET_KEY.search(key):
                if UUID.search(value):
                    return UUID.sub(lambda m: self._token(m.group(0), False), value)
                return self._token(value, "serial" in key.lower() or vpd)
            return self.text(value)
        return value

    def text(self, text: str) -> str:
        """Every value met so far, and every UUID-shaped string, masked in free text: in
        one pass, so that a stand-in is never masked again (masking is idempotent)."""
        known = sorted((v for v in self.masks if len(v) >= 6), key=len, reverse=True)
        if known:
            pattern = re.compile("|".join(map(re.escape, known)))
            text = pattern.sub(lambda m: self.masks[m.group(0)], text)
        stand_ins = set(self.masks.values())
        return UUID.sub(lambda m: m.group(0) if m.group(0) in stand_ins
                        else self._token(m.group(0), False), text)

    def leftovers(self, text: str) -> list[str]:
        """UUID-shaped strings and known secrets still in ``text`` (none, once masked)."""
        stand_ins = set(self.masks.values())
        found = [m for m in UUID.findall(text) if m not in stand_ins
                 and re.sub(r"[0-]", "", m)]
        return found + [v for v in self.masks if len(v) >= 6 and v in text]


# -- running, bounded ---------------------------------------------------------------------


@dataclass
class Step:
    name: str
    seconds: float = 0.0
    finished: bool = False  # exited within its bound (whatever its exit status)
    exit: int | None = None
    detail: str = ""


@dataclass
class Probe:
    out: Path
    work: Path
    carry: Path
    limit_s: float
    started: float = field(default_factory=time.monotonic)
    steps: list[Step] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def left(self) -> float:
        return self.limit_s - (time.monotonic() - self.started)

    def bounded(self, name: str, argv: Sequence[str], limit_s: float, log: Path,
                cwd: Path = REPO, pip: bool = False) -> Step:
        """Run ``argv`` with its output in ``log``, killed (its whole session) after
        ``limit_s`` or when the probe's own time runs out, whichever comes first. ``pip``:
        with no pip configuration (a machine's find-links or index must not stand in for
        the carried wheels)."""
        step = Step(name)
        self.steps.append(step)
        limit = min(limit_s, self.left() - 15.0)
        if limit < 5.0:
            step.detail = "not run: the probe's time ran out"
            print(f"{name}: {step.detail}", flush=True)
            return step
        began = time.monotonic()
        with log.open("w") as out:
            env = {**os.environ, **self.env}
            if pip:
                env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
                env["PIP_CONFIG_FILE"] = os.devnull
            proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                    env=env, start_new_session=True, stdin=subprocess.DEVNULL)
            try:
                step.exit = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                step.detail = f"killed after {limit:.0f} s"
        step.seconds = round(time.monotonic() - began, 1)
        step.finished = step.exit is not None and not step.detail
        print(f"{name}: exit {step.exit} in {step.seconds} s {step.detail}".rstrip(), flush=True)
        return step


def _capture(argv: Sequence[str]) -> str:
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=30,
                              check=False, errors="replace")
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{argv[0]}: {exc}"
    return (proc.stdout + proc.stderr).strip()


# -- run: on the GPU machine --------------------------------------------------------------


def environment(probe: Probe, masker: Masker) -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    caps = _capture([smi, "--query-gpu=name,compute_cap,driver_version",
                     "--format=csv,noheader"]) if smi else ""
    lines = [line for line in caps.splitlines() if line.count(",") == 2]
    arch = "sm_" + lines[0].split(",")[1].strip().replace(".", "") if lines else "sm_90"
    facts = {
        "gpus": [line.split(",")[0].strip() for line in lines],
        "arch": arch, "driver": lines[0].split(",")[2].strip() if lines else None,
        "nvidia_smi_L": masker.text(_capture([smi, "-L"])) if smi else "no nvidia-smi",
        "nvcc": _capture(["nvcc", "--version"]).splitlines()[-1:],
        "python": sys.version.split()[0], "executable": sys.executable,
        "programs": {p: shutil.which(p) for p in ("make", "g++", "gcc", "nm", "cmake", "dpkg",
                                                   "ibstat", "dcgmi")},
        "cpus": os.cpu_count(),
    }
    (probe.out / "environment.json").write_text(json.dumps(facts, indent=1) + "\n")
    return facts


def install(probe: Probe) -> bool:
    """clusterdiag (built from this checkout) and every package it needs, from the carried
    wheels alone, into a folder put first on PYTHONPATH: the machine's own packages (its
    PyTorch's NCCL among them) stay visible behind it."""
    wheels, dist, site = probe.carry / "wheels", probe.work / "dist", probe.work / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = probe.bounded("wheel", [*pip, "wheel", "-q", "--no-index", "--find-links",
                                    str(wheels), "--no-deps", "-w", str(dist), str(REPO)],
                          180, probe.out / "install.log", pip=True)
    if not built.finished or built.exit != 0:
        return False
    ours = sorted(dist.glob("clusterdiag-*.whl"))
    step = probe.bounded("install", [*pip, "install", "-q", "--no-index", "--find-links",
                                     str(wheels), "--no-compile", "--target", str(site),
                                     *map(str, ours)], 180, probe.out / "install-deps.log",
                          pip=True)
    probe.env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return step.finished and step.exit == 0


def build(probe: Probe, facts: Mapping[str, Any], given: argparse.Namespace) -> dict[str, str]:
    tools = Path(given.tools).resolve() if given.tools else probe.work / "tools"
    argv = [sys.executable, "-m", "dev.tools", "build", "--out", str(tools), "--src",
            str(probe.carry / "tools-src"), "--arch", str(facts["arch"]),
            "--nvml", str(probe.carry / "wheels")]
    system_boost = Path("/usr/include/boost/program_options.hpp").is_file()
    if given.boost == "carried" or (given.boost == "auto" and not system_boost):
        argv += ["--boost", str(probe.carry / "debs")]
    for name in ("nccl", "cublas"):
        if getattr(given, name):
            argv += [f"--{name}", getattr(given, name)]
    probe.bounded("build", argv, 330, probe.out / "build.log")
    logs = probe.out / "build"
    logs.mkdir(exist_ok=True)
    for log in (tools / "logs").glob("*.log"):
        shutil.copy2(log, logs / log.name)
    manifest = tools / "tools.json"
    if manifest.is_file():
        shutil.copy2(manifest, probe.out / "tools.json")
        found = json.loads(manifest.read_text()).get("tools") or {}
        return {k: str(tools / v) for k, v in found.items() if (tools / v).is_file()}
    return {}


_WRAPPER = """#!/bin/bash
# bench/device_probe.py: runs the real {name}, keeping a copy of what it printed
log="{raw}/{name}.$(date +%s%N)"
printf '%s\\n' "$0 $*" > "$log.argv"
env | grep -E '^(NCCL|CUDA)_' > "$log.env"
start=$(date +%s.%N)
"{real}" "$@" > "$log.out" 2> "$log.err"
rc=$?
echo "$rc $start $(date +%s.%N)" > "$log.rc"
cat "$log.out"
cat "$log.err" >&2
exit $rc
"""


def wrappers(probe: Probe, tools: Mapping[str, str]) -> Path:
    """A wrapper per built program (qualify runs these), and the config naming them."""
    folder, raw = probe.work / "bin", probe.out / "raw"
    folder.mkdir(exist_ok=True)
    raw.mkdir(exist_ok=True)
    named: dict[str, str] = {}
    for name, real in tools.items():
        if name == "gpu_burn_compare":  # beside the wrapper too, where gpu_burn is given
            shutil.copy2(real, folder / "compare.fatbin")
            named[name] = real
            continue
        wrapper = folder / name
        wrapper.write_text(_WRAPPER.format(name=name, raw=raw, real=real))
        wrapper.chmod(0o755)
        named[name] = str(wrapper)
    config = probe.work / "config.yaml"
    # qualify.tools takes only the programs qualify runs (agent/settings/config.py
    # qualify_tools: an unknown name is exit 2); sendrecv_perf and alltoall_perf are built
    # for the argument checks alone.
    config.write_text("# bench/device_probe.py\nqualify:\n  tools:\n" + "".join(
        f"    {k}: {json.dumps(v)}\n" for k, v in sorted(named.items())
        if k in QUALIFY_TOOLS))
    shutil.copy2(config, probe.out / "config.yaml")
    return config


def clusterdiag(probe: Probe, masker: Masker, config: Path | None) -> None:
    cli = [sys.executable, "-m", "clusterdiag.agent"]
    snap = probe.bounded("snapshot", [*cli, "snapshot", "--budget", "30"], 90,
                         probe.work / "snapshot.raw")
    text = (probe.work / "snapshot.raw").read_text(errors="replace")
    try:
        snapshot = masker.data(json.loads(text))
        (probe.out / "snapshot.json").write_text(json.dumps(snapshot, indent=1) + "\n")
    except json.JSONDecodeError:
        snap.finished = False
        snap.detail = "not JSON: " + masker.text(text[-300:])
        (probe.out / "snapshot.txt").write_text(masker.text(text))
    probe.bounded("run --level full", [*cli, "run", "--level", "full", "--budget", "60",
                                       "--format", "json", "--output",
                                       str(probe.out / "run.json")], 120,
                  probe.out / "run.log")
    budget = max(30.0, min(300.0, probe.left() - 60.0))
    qualify = [*cli, "qualify", "--via", "local", "--tests", "node", "--budget",
               f"{budget:.0f}", "--format", "json", "--output", str(probe.out / "qualify.json")]
    if config is not None:
        qualify += ["--config", str(config)]
    probe.bounded("qualify --via local --tests node", qualify, budget + 45,
                  probe.out / "qualify.log")


def mask_outputs(out: Path, masker: Masker) -> list[str]:
    """Mask every text file written (reports, logs, raw tool output); what is left."""
    left = []
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        masked = masker.text(text)
        if path.suffix == ".json":
            with contextlib.suppress(json.JSONDecodeError):
                masked = json.dumps(masker.data(json.loads(text)), indent=1) + "\n"
        if masked != text:
            path.write_text(masked)
        left += [f"{path.name}: {x}" for x in masker.leftovers(masked)]
    return left


def nvml(out: Path) -> None:
    """NVML's answer to every call clusterdiag makes (value, or the NVMLError class)."""
    import ctypes

    import pynvml

    pynvml.nvmlInit()
    answers: dict[str, object] = {}
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)

    def ask(name: str, *args: object) -> None:
        try:
            value = getattr(pynvml, name)(handle, *args)
            answers[f"{name}{list(args) if args else ''}"] = repr(value)[:200]
        except Exception as exc:  # noqa: BLE001 - recording what real NVML says
            answers[f"{name}{list(args) if args else ''}"] = type(exc).__name__

    for name in ("nvmlDeviceGetName", "nvmlDeviceGetArchitecture", "nvmlDeviceGetPersistenceMode",
                 "nvmlDeviceGetMigMode", "nvmlDeviceGetCurrentClocksEventReasons",
                 "nvmlDeviceGetPerformanceState", "nvmlDeviceGetCurrPcieLinkGeneration",
                 "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkGeneration",
                 "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetPcieReplayCounter",
                 "nvmlDeviceGetEccMode", "nvmlDeviceGetRemappedRows",
                 "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetUnrepairableMemoryFlag_v1",
                 "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceValidateInforom",
                 "nvmlDeviceGetInforomImageVersion", "nvmlDeviceGetBoardPartNumber"):
        ask(name)
    for kind in (0, 1, 2, 3):
        ask("nvmlDeviceGetTemperatureThreshold", kind)
    for link in (0, 17, 18):
        ask("nvmlDeviceGetNvLinkState", link)
        ask("nvmlDeviceGetNvLinkRemoteDeviceType", link)
    try:
        hist = pynvml.nvmlDeviceGetRowRemapperHistogram(handle)
        answers["histogram"] = {k: getattr(hist, k) for k in ("max", "high", "partial", "low",
                                                             "none")}
    except pynvml.NVMLError as exc:
        answers["histogram"] = type(exc).__name__
    for struct in ("c_nvmlGpuFabricInfo_v3_t", "c_nvmlGpuFabricInfoV_t"):
        info = getattr(pynvml, struct)()
        try:
            pynvml.nvmlDeviceGetGpuFabricInfoV(handle, ctypes.byref(info))
            answers[f"fabric {struct}"] = {k: (bytes(getattr(info, k)).hex()
                                               if k == "clusterUuid" else getattr(info, k))
                                           for k, _ in info._fields_}
        except pynvml.NVMLError as exc:
            answers[f"fabric {struct}"] = type(exc).__name__
    fields = [1, 2, 3, 4, 5, 6, 29, 30, 31, 82, 91, 94, 142, 143, 144, 145, 147, 185, 189, 190,
              193, 194, 230, (161, 0), (162, 0), (163, 0), (164, 0), (165, 0), (166, 0),
              (208, 0), (214, 0), (215, 0), (221, 0)]
    values = pynvml.nvmlDeviceGetFieldValues(handle, fields)
    answers["fields"] = {str(fields[i]): (values[i].nvmlReturn, values[i].valueType,
                                          values[i].value.ullVal) for i in range(len(fields))}
    out.mkdir(parents=True, exist_ok=True)
    (out / "nvml-probe.json").write_text(json.dumps(answers, indent=1, default=str) + "\n")


def mask(name: str) -> int:
    """The masking of ``run`` on its own: the masked JSON on stdout, and on stderr how
    many values were masked and whatever UUID-shaped text is left (nothing: exit 0)."""
    text = sys.stdin.read() if name == "-" else Path(name).read_text()
    masker = Masker()
    masked = json.dumps(masker.data(json.loads(text)), indent=1)
    left = masker.leftovers(masked)
    print(masked)
    print(f"masked {len(masker.masks)} values; left: {left or 'nothing'}", file=sys.stderr)
    return 1 if left else 0


def run(given: argparse.Namespace) -> int:
    out = given.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    work = Path(given.work or f"/tmp/clusterdiag-probe-{os.getpid()}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    probe = Probe(out, work, given.carry.resolve(), given.limit_s)
    masker = Masker()
    if not (probe.carry / "carry.json").is_file():
        print(f"no {probe.carry}/carry.json: run `python3 bench/device_probe.py prepare` "
              f"first (with network)", file=sys.stderr)
        return 2
    facts = environment(probe, masker)
    print(f"GPUs {facts['gpus'] or 'none'}, {facts['arch']}, driver {facts['driver']}, "
          f"Python {facts['python']}, {facts['cpus']} CPUs", flush=True)
    installed = install(probe)
    tools = build(probe, facts, given)
    config = wrappers(probe, tools) if tools else None
    if installed:
        probe.bounded("nvml", [sys.executable, str(Path(__file__).resolve()), "nvml",
                               str(out)], 60, out / "nvml.log")
        clusterdiag(probe, masker, config)
    left = mask_outputs(out, masker)
    summary = {
        "limit_s": probe.limit_s, "seconds": round(time.monotonic() - probe.started, 1),
        "gpus": facts["gpus"], "arch": facts["arch"], "driver": facts["driver"],
        "python": facts["python"], "tools": sorted(tools),
        "tool_build_s": {k: v.get("seconds") for k, v in (json.loads(
            (out / "tools.json").read_text()).get("builds") or {}).items()}
        if (out / "tools.json").is_file() else {},
        "steps": [asdict(s) for s in probe.steps], "masked_values": len(masker.masks),
        "unmasked_left": left[:20], "raw_outputs": len(list((out / "raw").glob("*.out")))
        if (out / "raw").is_dir() else 0,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    if given.archive:
        with tarfile.open(given.archive, "w:gz") as archive:
            archive.add(out, arcname=out.name)
    if not given.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(summary, indent=1))
    return 0 if all(s.finished for s in probe.steps) and not left else 1


# -- prepare: here, with network ----------------------------------------------------------


def requirements() -> list[str]:
    """The project's runtime dependencies, read from pyproject.toml."""
    text = (REPO / "pyproject.toml").read_text()
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.M | re.S)
    assert block is not None, "pyproject.toml has no dependencies list"
    return re.findall(r'"([^"]+)"', block.group(1))


def _pip_download(into: Path, python: str, names: Iterable[str], deps: bool = True) -> None:
    argv = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
            "--only-binary=:all:", "--python-version", python, "--implementation", "cp",
            *[x for p in PLATFORMS for x in ("--platform", p)], "-d", str(into), *names]
    subprocess.run(argv if deps else [*argv, "--no-deps"], check=True)


def _debs(into: Path) -> list[str]:
    """Boost program_options' .deb files and the Boost ones they depend on."""
    names, todo = set(), [BOOST]
    while todo:
        name = todo.pop()
        if name in names:
            continue
        names.add(name)
        shown = subprocess.run(["apt-cache", "depends", name], capture_output=True, text=True,
                               check=True).stdout
        todo += [d for d in re.findall(r"^\s+Depends: (\S+)", shown, re.M)
                 if d.startswith("libboost")]
    subprocess.run(["apt-get", "download", "-q", *sorted(names)], cwd=into, check=True,
                   capture_output=True)
    return sorted(names)


def _mib(paths: Iterable[Path]) -> float:
    return sum(p.stat().st_size for p in paths if p.is_file()) / 2**20


def checkout_mib() -> float:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    return _mib(REPO / p for p in listed if p)


def prepare(given: argparse.Namespace) -> int:
    carry: Path = given.carry.resolve()
    started = time.monotonic()
    for sub in ("tools-src", "wheels", "debs"):
        (carry / sub).mkdir(parents=True, exist_ok=True)
    tarballs = sorted(given.src.glob("*.tar.gz"))
    if not tarballs:
        print(f"no tool sources in {given.src}", file=sys.stderr)
        return 1
    for tarball in tarballs:
        shutil.copy2(tarball, carry / "tools-src" / tarball.name)
    wheels = carry / "wheels"
    for python in given.pythons.split(","):
        _pip_download(wheels, python, [*requirements(), *BUILD_REQUIRES])
    _pip_download(wheels, "3.12", EXTRA_WHEELS, deps=False)
    debs = _debs(carry / "debs") if shutil.which("apt-get") else []
    (carry / "README.md").write_text(
        "Made by `python3 bench/device_probe.py prepare`: what a GPU machine with no "
        "network needs beyond the checkout. Neither tracked nor ignored, so that it "
        "travels with the checkout to the device machine: never commit it.\n")
    files = [p for p in carry.rglob("*") if p.is_file()]
    sizes = {sub: round(_mib(p for p in files if p.parent.name == sub), 2)
             for sub in ("tools-src", "wheels", "debs")}
    total = _mib(files)
    repo = checkout_mib()
    record = {"prepared_s": round(time.monotonic() - started, 1), "pythons": given.pythons,
              "tarballs": [t.name for t in tarballs], "debs": debs,
              "wheels": sorted(p.name for p in wheels.glob("*.whl")), "mib": sizes,
              "carry_mib": round(total, 2), "checkout_mib": round(repo, 2),
              "together_mib": round(total + repo, 2), "limit_mib": LIMIT_MIB}
    (carry / "carry.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "wheels"}, indent=1))
    if total + repo > LIMIT_MIB:
        print(f"too large: {total + repo:.1f} MiB with the checkout, over {LIMIT_MIB}",
              file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/device_probe.py", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="fill the carry folder (here, with network)")
    p.add_argument("--carry", type=Path, default=CARRY)
    p.add_argument("--src", type=Path, default=SHARED_SRC)
    p.add_argument("--pythons", default=",".join(PYTHONS))
    r = sub.add_parser("run", help="on the GPU machine: build, run, write DIR")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--carry", type=Path, default=CARRY)
    r.add_argument("--archive", type=Path, help="also write DIR as this .tar.gz")
    r.add_argument("--limit-s", type=float, default=480.0)
    r.add_argument("--work", help="scratch folder (default /tmp/clusterdiag-probe-PID)")
    r.add_argument("--keep", action="store_true", help="keep the scratch folder")
    r.add_argument("--tools", help="build into (and reuse) this folder, not the scratch one")
    r.add_argument("--boost", choices=("auto", "system", "carried"), default="auto")
    r.add_argument("--nccl", help="for dev.tools (default: this Python's nvidia-nccl-cu13)")
    r.add_argument("--cublas", help="for dev.tools (default: the toolkit's or nvidia-cublas)")
    n = sub.add_parser("nvml", help="NVML's answers to clusterdiag's calls, into DIR")
    n.add_argument("out", type=Path)
    m = sub.add_parser("mask", help="print a JSON file (a snapshot, a report) masked")
    m.add_argument("file", help="the file, or - for stdin")
    given = parser.parse_args(argv)
    if given.command == "mask":
        return mask(given.file)
    if given.command == "prepare":
        return prepare(given)
    if given.command == "nvml":
        nvml(given.out)
        return 0
    return run(given)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
