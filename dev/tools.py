"""Build the real tools ``clusterdiag qualify`` drives, from their unmodified sources:

    python -m dev.tools build [--out .tools] [--src ../shared/tools-src] [--arch sm_90]
                              [--nccl PATH] [--cublas PATH] [--nvml PATH] [--boost PATH]
                              [--only nccl-tests,gpu-burn,nvbandwidth] [--jobs N] [--force]
    python -m dev.tools build --check [--out .tools]     # list what is there, build nothing

What it builds, for one GPU architecture (a full nccl-tests build for every architecture
took 7 minutes on 2 cores; one takes under 3):

- nccl-tests' ``all_reduce_perf``, ``sendrecv_perf`` and ``alltoall_perf`` (not MPI),
  against NCCL from a wheel (``--nccl``: a ``nvidia-nccl-cu13``/``-cu12`` wheel file, a
  folder holding one, or a folder with ``include/nccl.h`` and ``lib/``), else from the
  package of that name installed in this Python (a GPU machine's PyTorch brings one). The
  wheel ships only ``libnccl.so.2``; the link needs ``libnccl.so``, made as a link beside
  it under ``OUT/deps``. The binaries carry NCCL's folder as their run path.
- gpu-burn's ``gpu_burn`` and its ``compare.fatbin`` (PTX for the architecture, compiled
  at load), against cuBLAS from the CUDA toolkit, ``--cublas`` (a ``nvidia-cublas`` wheel
  or folder) or the installed ``nvidia-cublas`` package.
- nvbandwidth, where CMake, ``nvml.h`` (the toolkit, ``--nvml``: a ``nvidia-nvml-dev``
  wheel or folder, or that package installed) and Boost ``program_options`` are there:
  the system's, or ``--boost`` (a prefix, or a folder of Debian ``.deb`` files unpacked
  here with ``dpkg -x``).

The NVIDIA driver's own libraries (``libcuda.so.1``, ``libnvidia-ml.so.1``) are linked
through link-only stubs made from the objects' undefined symbols, as CUDA's own stubs
are: the same build works on a machine with no driver and on a GPU node, and at run time
the programs load the driver's real libraries. Sources are unpacked and built in a
scratch folder outside any git checkout (nvbandwidth's CMake asks ``git describe``).

``OUT/tools.json`` lists what was built (program -> path, relative to OUT), from what, and
how long each build took; a tool whose inputs are unchanged is not built again. The tests
that drive the real binaries (tests/integration/test_real_tools.py) read it through
``CLUSTERDIAG_TOOLS_DIR`` (default ``.tools``); ``bench/device_probe.py`` builds with it
on a GPU machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO / ".tools"
DEFAULT_SRC = REPO.parent / "shared" / "tools-src"
MANIFEST = "tools.json"
TOOLS = ("nccl-tests", "gpu-burn", "nvbandwidth")
NCCL_TESTS = ("all_reduce", "sendrecv", "alltoall")
# Substrings gpu_burn reads as options wherever they appear in an argument, the -c path
# included (gpu_burn-drv.cpp: strstr for -h, -l, -d, -tc): a compare file under such a
# path is misread.
GPU_BURN_TRAPS = ("-h", "-l", "-d", "-tc")


class BuildError(Exception):
    """A tool could not be built: what failed, and where its log is."""


@dataclass
class Found:
    """Where one input was found: its include and library folders, and what it is."""

    include: Path
    lib: Path | None
    origin: str


@dataclass
class Plan:
    out: Path
    src: Path
    arch: str
    jobs: int
    cuda: Path
    nccl: str | None
    cublas: str | None
    nvml: str | None
    boost: str | None
    work: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))

    @property
    def cuda_lib(self) -> Path:
        """lib64 in a toolkit, lib in a pip-installed one (nvidia/cu13)."""
        return self.cuda / "lib64" if (self.cuda / "lib64").is_dir() else self.cuda / "lib"

    @property
    def compute(self) -> str:
        digits = re.sub(r"\D", "", self.arch)
        if not digits:
            raise BuildError(f"--arch {self.arch}: expected sm_NN (sm_90, sm_100)")
        return digits


# -- finding inputs -----------------------------------------------------------------------


def cuda_home() -> Path | None:
    """The CUDA toolkit: $CUDA_HOME, /usr/local/cuda, or where ``nvcc`` lives (a wrapper
    script on PATH is followed to the toolkit whose headers it has)."""
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    for given in candidates:
        if given and (Path(given) / "bin" / "nvcc").is_file() \
                and (Path(given) / "include" / "cuda_runtime.h").is_file():
            return Path(given)
    return None


def site_dirs() -> list[Path]:
    return [Path(p) for p in sys.path if p and Path(p).is_dir()]


def _wheels(folder: Path, pattern: str) -> list[Path]:
    return sorted(folder.glob(pattern), reverse=True)


def _unpack_wheel(wheel: Path, into: Path, members: str) -> Path:
    """The wheel's files under ``members`` (a path prefix), unpacked once into ``into``."""
    stamp = into / ".from"
    tag = f"{wheel.name} {wheel.stat().st_size}"
    if stamp.is_file() and stamp.read_text() == tag:
        return into
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.filename.startswith(members) and not info.is_dir():
                archive.extract(info, into)
    stamp.write_text(tag)
    return into


def _resolve(given: str | None, wheel_glob: str, prefixes: Sequence[str], header: str,
             lib_glob: str | None, deps: Path, name: str) -> Found | None:
    """An input from a wheel file, a folder holding such a wheel, an unpacked tree
    (``include/`` + ``lib/``), or else the package installed in this Python."""
    roots: list[tuple[Path, str]] = []
    if given:
        path = Path(given).resolve()
        if path.is_file() and path.suffix == ".whl":
            roots.append((_unpack_wheel(path, deps / name, "nvidia/"), f"wheel {path.name}"))
        elif path.is_dir() and _wheels(path, wheel_glob):
            wheel = _wheels(path, wheel_glob)[0]
            roots.append((_unpack_wheel(wheel, deps / name, "nvidia/"), f"wheel {wheel.name}"))
        elif path.is_dir():
            roots.append((path, f"folder {path}"))
        else:
            raise BuildError(f"--{name} {given}: neither a wheel nor a folder")
    else:
        roots += [(site, f"installed package in {site}") for site in site_dirs()]
    for root, origin in roots:
        for prefix in ("", *prefixes):
            base = root / prefix if prefix else root
            include = base / "include"
            if not (include / header).is_file():
                continue
            lib = base / "lib"
            if lib_glob is not None and not any(lib.glob(lib_glob)):
                continue
            return Found(include, lib if lib.is_dir() else None, origin)
    return None


def find_nccl(plan: Plan) -> Found:
    found = _resolve(plan.nccl, "nvidia_nccl_cu1[0-9]-*.whl", ("nvidia/nccl",), "nccl.h",
                     "libnccl.so*", plan.out / "deps", "nccl")
    if found is None or found.lib is None:
        raise BuildError("no NCCL: give --nccl (a nvidia-nccl-cu13 wheel or a folder), or "
                         "install nvidia-nccl-cu13 in this Python")
    # The wheel ships libnccl.so.2 alone; -lnccl wants libnccl.so.
    if not (found.lib / "libnccl.so").exists():
        home = plan.out / "deps" / "nccl-home"
        (home / "lib").mkdir(parents=True, exist_ok=True)
        for name, target in (("include", found.include), ("lib/libnccl.so.2",
                                                          found.lib / "libnccl.so.2"),
                             ("lib/libnccl.so", found.lib / "libnccl.so.2")):
            link = home / name
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(target)
        return Found(home / "include", found.lib, found.origin)
    return found


def find_cublas(plan: Plan) -> Found:
    if plan.cublas is None and (plan.cuda / "include" / "cublas_v2.h").is_file() \
            and any(plan.cuda_lib.glob("libcublas.so*")):
        return Found(plan.cuda / "include", plan.cuda_lib, f"CUDA toolkit {plan.cuda}")
    found = _resolve(plan.cublas, "nvidia_cublas*.whl", ("nvidia/cu13", "nvidia/cublas",
                                                          "nvidia/cu12"),
                     "cublas_v2.h", "libcublas.so*", plan.out / "deps", "cublas")
    if found is None or found.lib is None:
        raise BuildError("no cuBLAS: give --cublas (a nvidia-cublas wheel or folder), or "
                         "install nvidia-cublas in this Python")
    return found


def find_nvml(plan: Plan) -> Found | None:
    for include in (plan.cuda / "include", plan.cuda / "targets/x86_64-linux/include"):
        if plan.nvml is None and (include / "nvml.h").is_file():
            return Found(include, None, f"CUDA toolkit {plan.cuda}")
    return _resolve(plan.nvml, "nvidia_nvml_dev*.whl", ("nvidia/cu13", "nvidia/cu12",
                                                         "nvidia/nvml"),
                    "nvml.h", None, plan.out / "deps", "nvml")


def find_boost(plan: Plan) -> tuple[list[str], str] | None:
    """CMake arguments that find Boost program_options, and where it is from."""
    if plan.boost:
        given = Path(plan.boost).resolve()
        debs = sorted(given.glob("*.deb")) if given.is_dir() else []
        prefix = given
        if debs:
            prefix = plan.out / "deps" / "boost"
            tag = " ".join(f"{d.name}:{d.stat().st_size}" for d in debs)
            stamp = prefix / ".from"
            if not (stamp.is_file() and stamp.read_text() == tag):
                shutil.rmtree(prefix, ignore_errors=True)
                prefix.mkdir(parents=True)
                for deb in debs:
                    _run(["dpkg", "-x", str(deb), str(prefix)], None, 120.0)
                stamp.write_text(tag)
        configs = sorted(prefix.rglob("BoostConfig.cmake"))
        if not configs:
            raise BuildError(f"--boost {plan.boost}: no BoostConfig.cmake in it")
        return ([f"-DBoost_DIR={configs[-1].parent}"],
                f"{len(debs)} .deb files unpacked" if debs else f"prefix {prefix}")
    for lib in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"):
        if any(Path(lib).glob("libboost_program_options.*")) \
                and Path("/usr/include/boost/program_options.hpp").is_file():
            return [], f"system ({lib})"
    return None


# -- running ------------------------------------------------------------------------------


def _run(argv: Sequence[str], log: Path | None, timeout_s: float, cwd: Path | None = None,
         env: dict[str, str] | None = None, check: bool = True) -> int:
    """Run a build command, its output appended to ``log`` (or dropped)."""
    with (log.open("a") if log is not None else open(os.devnull, "w")) as out:
        print(f"$ {' '.join(argv)}", file=out, flush=True)
        proc = subprocess.run(list(argv), cwd=cwd, stdout=out, stderr=subprocess.STDOUT,
                              timeout=timeout_s, check=False,
                              env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        tail = "".join(log.read_text(errors="replace").splitlines(True)[-15:]) if log else ""
        raise BuildError(f"{argv[0]} exited {proc.returncode}"
                         + (f" (log {log}):\n{tail}" if log else ""))
    return proc.returncode


def _unpack(tarball: Path, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    _run(["tar", "-xzf", str(tarball), "-C", str(into)], None, 120.0)
    folders = [p for p in into.iterdir() if p.is_dir()]
    if len(folders) != 1:
        raise BuildError(f"{tarball.name}: expected one top folder, found {len(folders)}")
    return folders[0]


def make_stub(out: Path, soname: str, pattern: str, objects: Sequence[Path]) -> int:
    """A link-only library: every undefined symbol of ``objects`` matching ``pattern`` as
    an empty function. Never loaded: at run time the driver's own library is."""
    listed = subprocess.run(["nm", "-u", *map(str, objects)], capture_output=True, text=True,
                            check=True).stdout
    symbols = sorted({line.split()[-1] for line in listed.splitlines()
                      if line.strip() and re.match(pattern, line.split()[-1])})
    source = out.with_suffix(".c")
    source.write_text("/* generated link-only stub */\n"
                      + "".join(f"int {s}(void) {{ return 999; }}\n" for s in symbols))
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), f"-Wl,-soname,{soname}",
                    str(source)], check=True)
    return len(symbols)


def tarball(plan: Plan, tool: str) -> Path:
    found = sorted(plan.src.glob(f"{tool}-*.tar.gz"))
    if not found:
        raise BuildError(f"no {tool}-*.tar.gz in {plan.src}")
    return found[-1]


def _key(*parts: object) -> str:
    return " | ".join(str(p) for p in parts)


def _stat(path: Path) -> str:
    return f"{path.name}:{path.stat().st_size}"


# -- the three builds: each a key (its inputs, to skip an unchanged build) and a build ---


def key_nccl_tests(plan: Plan) -> str:
    nccl = find_nccl(plan)
    assert nccl.lib is not None
    return _key(_stat(tarball(plan, "nccl-tests")), plan.arch, nccl.origin,
                (nccl.lib / "libnccl.so.2").resolve())


def build_nccl_tests(plan: Plan, work: Path, log: Path) -> dict[str, str]:
    nccl = find_nccl(plan)
    assert nccl.lib is not None
    tree = _unpack(tarball(plan, "nccl-tests"), work)
    build = work / "build"
    # No -rpath in nccl-tests' link line: LD_RUN_PATH gives the binaries NCCL's folder.
    _run(["make", f"-j{plan.jobs}", "-C", str(tree / "src"), "build",
          f"CUDA_HOME={plan.cuda}", f"CUDA_LIB={plan.cuda_lib}",
          f"NCCL_HOME={nccl.include.parent}",
          f"NVCC_GENCODE=-gencode=arch=compute_{plan.compute},code=sm_{plan.compute}",
          f"BIN_FILES_LIST={' '.join(NCCL_TESTS)}", f"BUILDDIR={build}"],
         log, 1800.0, env={"LD_RUN_PATH": str(nccl.lib.resolve())})
    dest = plan.out / "nccl-tests"
    dest.mkdir(parents=True, exist_ok=True)
    made = {}
    for name in NCCL_TESTS:
        shutil.copy2(build / f"{name}_perf", dest / f"{name}_perf")
        made[f"{name}_perf"] = f"nccl-tests/{name}_perf"
    return made


def key_gpu_burn(plan: Plan) -> str:
    cublas = find_cublas(plan)
    assert cublas.lib is not None
    # The binary's run path names cuBLAS's folder: a moved folder is a new build.
    return _key(_stat(tarball(plan, "gpu-burn")), plan.arch, cublas.origin,
                cublas.lib.resolve())


def build_gpu_burn(plan: Plan, work: Path, log: Path) -> dict[str, str]:
    cublas = find_cublas(plan)
    assert cublas.lib is not None
    tree = _unpack(tarball(plan, "gpu-burn"), work)
    stubs = work / "stubs"
    stubs.mkdir()
    if not (cublas.lib / "libcublas.so").exists():  # the wheel has libcublas.so.N alone
        versioned = sorted(cublas.lib.glob("libcublas.so.*"))
        (stubs / "libcublas.so").symlink_to(versioned[0])
    lib = cublas.lib.resolve()
    # The Makefile appends its own flags to these (override +=).
    make = ["make", "-C", str(tree), f"CUDAPATH={plan.cuda}", f"COMPUTE={plan.compute}",
            "IS_JETSON=false", f"CFLAGS=-I{cublas.include}",
            f"LDFLAGS=-L{stubs} -L{lib} -Wl,-rpath={lib} -Wl,-rpath-link={lib}"]
    _run([*make, "gpu_burn-drv.o"], log, 600.0)
    make_stub(stubs / "libcuda.so", "libcuda.so.1", r"^cu[A-Z]", [tree / "gpu_burn-drv.o"])
    _run(make, log, 600.0)
    dest = plan.out / "gpu_burn"
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("gpu_burn", "compare.fatbin"):
        shutil.copy2(tree / name, dest / name)
    return {"gpu_burn": "gpu_burn/gpu_burn", "gpu_burn_compare": "gpu_burn/compare.fatbin"}


def _cmake() -> str:
    cmake = shutil.which("cmake") or str(Path(sys.executable).parent / "cmake")
    if not Path(cmake).exists():
        raise BuildError("no cmake (nvbandwidth builds with CMake)")
    return cmake


def _nvbandwidth_inputs(plan: Plan) -> tuple[Found, list[str], str]:
    nvml = find_nvml(plan)
    if nvml is None:
        raise BuildError("no nvml.h: give --nvml (a nvidia-nvml-dev wheel or folder)")
    boost = find_boost(plan)
    if boost is None:
        raise BuildError("no Boost program_options: apt-get install "
                         "libboost-program-options-dev, or give --boost")
    return nvml, *boost


def key_nvbandwidth(plan: Plan) -> str:
    _cmake()
    nvml, _, boost = _nvbandwidth_inputs(plan)
    return _key(_stat(tarball(plan, "nvbandwidth")), plan.arch, nvml.origin, boost)


def build_nvbandwidth(plan: Plan, work: Path, log: Path) -> dict[str, str]:
    cmake = _cmake()
    nvml, boost_args, _ = _nvbandwidth_inputs(plan)
    tree = _unpack(tarball(plan, "nvbandwidth"), work)
    build, stubs = work / "build", work / "stubs"
    stubs.mkdir()
    flags = f"-I{nvml.include}"  # CMAKE_CXX_FLAGS alone does not reach kernels.cu
    _run([cmake, "-S", str(tree), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
          f"-DCMAKE_CUDA_ARCHITECTURES={plan.compute}",
          f"-DCMAKE_CUDA_COMPILER={plan.cuda / 'bin' / 'nvcc'}",
          f"-DCMAKE_CXX_FLAGS={flags}", f"-DCMAKE_CUDA_FLAGS={flags}",
          f"-DCMAKE_EXE_LINKER_FLAGS=-L{stubs}", *boost_args], log, 600.0)
    # Compile everything first (the link may fail without the stubs), then link.
    _run([cmake, "--build", str(build), "-j", str(plan.jobs), "--", "-k"], log, 1800.0,
         check=False)
    objects = sorted(build.rglob("*.o"))
    # One stub per library: a shared one would let --as-needed drop libcuda.so.1.
    make_stub(stubs / "libcuda.so", "libcuda.so.1", r"^cu[A-Z]", objects)
    make_stub(stubs / "libnvidia-ml.so", "libnvidia-ml.so.1", r"^nvml[A-Z]", objects)
    _run([cmake, "--build", str(build), "-j", str(plan.jobs)], log, 1800.0)
    dest = plan.out / "nvbandwidth"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(build / "nvbandwidth", dest / "nvbandwidth")
    return {"nvbandwidth": "nvbandwidth/nvbandwidth"}


BUILDERS = {"nccl-tests": (key_nccl_tests, build_nccl_tests),
            "gpu-burn": (key_gpu_burn, build_gpu_burn),
            "nvbandwidth": (key_nvbandwidth, build_nvbandwidth)}


# -- the manifest -------------------------------------------------------------------------


def load(out: Path) -> dict[str, object]:
    path = out / MANIFEST
    if not path.is_file():
        return {"tools": {}, "builds": {}}
    data: dict[str, object] = json.loads(path.read_text())
    return data


def present(out: Path) -> dict[str, Path]:
    """Program name -> absolute path, for every built program still there."""
    tools = load(out).get("tools")
    found = {}
    for name, rel in (tools.items() if isinstance(tools, dict) else ()):
        path = out / str(rel)
        if path.is_file():
            found[str(name)] = path
    return found


def _builds(data: dict[str, object]) -> dict[str, dict[str, object]]:
    builds = data.setdefault("builds", {})
    assert isinstance(builds, dict)
    return builds


def _up_to_date(plan: Plan, previous: dict[str, object], key: str) -> bool:
    programs = previous.get("programs")
    return previous.get("key") == key and isinstance(programs, dict) and bool(programs) \
        and all((plan.out / str(p)).is_file() for p in programs.values())


def build_all(plan: Plan, only: Sequence[str], force: bool) -> int:
    """Build each tool of ``only``; the number that could not be built."""
    plan.out.mkdir(parents=True, exist_ok=True)
    (plan.out / "logs").mkdir(exist_ok=True)
    data = load(plan.out)
    builds = _builds(data)
    failed = 0
    for tool in only:
        log = plan.out / "logs" / f"{tool}.log"
        started = time.monotonic()
        previous = builds.get(tool, {})
        keyed, builder = BUILDERS[tool]
        try:
            key = keyed(plan)
            if not force and _up_to_date(plan, previous, key):
                print(f"{tool}: up to date (built in {previous.get('seconds')} s)")
                continue
            log.write_text("")
            with tempfile.TemporaryDirectory(prefix=f"clusterdiag-{tool}-",
                                             dir=plan.work) as work:
                made = builder(plan, Path(work), log)
        except (BuildError, subprocess.SubprocessError, OSError) as exc:
            failed += 1
            builds[tool] = {"error": str(exc).splitlines()[0]}
            print(f"{tool}: NOT built ({time.monotonic() - started:.1f} s): {exc}")
            continue
        seconds = round(time.monotonic() - started, 1)
        builds[tool] = {"key": key, "programs": made, "arch": plan.arch, "seconds": seconds}
        print(f"{tool}: built in {seconds} s ({', '.join(made)})")
    tools: dict[str, str] = {}
    for entry in builds.values():
        programs = entry.get("programs")
        if isinstance(programs, dict):
            tools.update({str(k): str(v) for k, v in programs.items()})
    data["tools"] = tools
    (plan.out / MANIFEST).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    compare = plan.out / tools.get("gpu_burn_compare", "-")
    if "gpu_burn_compare" in tools and any(t in str(compare) for t in GPU_BURN_TRAPS):
        print(f"warning: {compare} contains one of {' '.join(GPU_BURN_TRAPS)}, which "
              f"gpu_burn reads as options inside its -c argument")
    return failed


def check(out: Path) -> int:
    data = load(out)
    builds = _builds(data)
    found = present(out)
    print(f"{out}:")
    for tool in TOOLS:
        entry = builds.get(tool, {})
        programs = entry.get("programs") if isinstance(entry, dict) else None
        if isinstance(programs, dict) and all(str(k) in found for k in programs):
            print(f"  {tool}: {', '.join(map(str, programs))} ({entry.get('arch')}, "
                  f"built in {entry.get('seconds')} s)")
        else:
            why = entry.get("error") if isinstance(entry, dict) else None
            print(f"  {tool}: absent" + (f" ({why})" if why else ""))
    return 0


def _iter_only(text: str) -> Iterator[str]:
    for name in text.split(","):
        if name.strip() not in TOOLS:
            raise SystemExit(f"--only: {name.strip()!r} is none of {', '.join(TOOLS)}")
        yield name.strip()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.tools", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the tools (or --check what is built)")
    b.add_argument("--out", type=Path, default=DEFAULT_OUT)
    b.add_argument("--src", type=Path, default=DEFAULT_SRC, help="the tarballs' folder")
    b.add_argument("--arch", default="sm_90")
    b.add_argument("--nccl", help="nvidia-nccl-cu13 wheel, a folder with one, or a tree")
    b.add_argument("--cublas", help="nvidia-cublas wheel, a folder with one, or a tree")
    b.add_argument("--nvml", help="nvidia-nvml-dev wheel, a folder with one, or a tree")
    b.add_argument("--boost", help="a prefix with Boost's CMake files, or a folder of .debs")
    b.add_argument("--only", default=",".join(TOOLS))
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    b.add_argument("--force", action="store_true", help="build even what is up to date")
    b.add_argument("--check", action="store_true", help="list what is built, build nothing")
    args = parser.parse_args(argv)
    out = args.out.resolve()
    if args.check:
        return check(out)
    cuda = cuda_home()
    if cuda is None:
        print("no CUDA toolkit (nvcc and cuda_runtime.h): set CUDA_HOME; nothing built")
        return 1
    if not args.src.is_dir():
        print(f"no tool sources: {args.src} is not a folder; nothing built")
        return 1
    plan = Plan(out, args.src.resolve(), args.arch, max(1, args.jobs), cuda, args.nccl,
                args.cublas, args.nvml, args.boost)
    print(f"building into {out} for {args.arch} with {cuda}, {plan.jobs} jobs")
    failed = build_all(plan, list(_iter_only(args.only)), args.force)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
