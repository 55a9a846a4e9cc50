"""The real tools ``clusterdiag qualify`` drives, given every invocation its planner issues,
on a machine with no GPU (docs/development.md, "Real tools").

- nccl-tests (built by ``python -m dev.tools build``): each all_reduce/sendrecv/alltoall
  command line of ``node_steps`` is accepted (no ``USAGE:``, no ``invalid option``), and
  what the binary then prints without a GPU (CUDA's initialisation failure) is judged an
  ``error`` naming that cause: never a pass, a fail or a drain.
- gpu-burn, which rejects no argument: what it prints back (``Using compare file: X``,
  ``Burning for N seconds.``) is what the planner asked for. It runs against a stand-in
  ``libcuda.so.1`` made here (cuInit answers "no CUDA-capable device"): without any
  driver the loader stops it before it prints a word. The trap of its argument parsing (a
  ``-h``, ``-l``, ``-d`` or ``-tc`` anywhere in an argument, the compare file's path
  included, is read as that option) is documented by a run of each.
- nvbandwidth (where built): the planner's ``-t`` cases exist (``nvbandwidth -l``) and its
  arguments parse.
- Debian's perftest, built without CUDA: the planner's host-memory ``ib_write_bw`` command
  line parses; ``--use_cuda`` is refused, and that refusal is judged an error naming the
  missing CUDA support (or a host-memory fallback), never a node fault.
- Debian's ``ibstat`` over a simulated node's /sys (bind-mounted in a private mount
  namespace: root and ``unshare -m``), compared line by line with the simulator's stand-in.

Each test skips, saying why, where its binary, compiler or privilege is missing. The built
tools are read from ``$CLUSTERDIAG_TOOLS_DIR`` (default ``.tools``; ``.ci/run``'s ``tools``
stage builds them there).

What these tests assume of the planner (agent/qualify/plan.py), so that it stays true:
``node_steps(Inventory, Level, settings, tests)`` returns steps with ``tool`` (the parser's
name), ``test``, ``argv`` (``argv[0]`` the program: the path in ``settings["tools"]``
under the program's name, else the bare name), ``env`` and ``server_argv``; the gpu_burn
step names its compare file with ``-c PATH`` and its seconds as the one bare number; the
compare file is ``settings["tools"]["gpu_burn_compare"]`` or ``compare.fatbin`` beside
the ``gpu_burn`` given; an ``Inventory`` field with ``cuda`` in its name, where there is
one, says whether the installed perftest takes ``--use_cuda``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.base.errors import ClusterdiagError
from clusterdiag.agent.model.qualify import ToolRun
from clusterdiag.agent.qualify import parsers
from clusterdiag.agent.qualify.inventory import compare_file
from clusterdiag.agent.qualify.launch import command_runner
from clusterdiag.agent.qualify.plan import NODE_TESTS, Inventory, Rail, Step, node_steps
from clusterdiag.checks.core.finding import Action, Finding, Status
from clusterdiag.checks.core.levels import Level
from clusterdiag.checks.qualify.judge import run_findings
from tests.conftest import REPO

TOOLS_DIR = Path(os.environ.get("CLUSTERDIAG_TOOLS_DIR") or REPO / ".tools")
BUILD_HINT = ("python -m dev.tools build (needs CUDA's nvcc and ../shared/tools-src; "
              ".ci/run's tools stage runs it)")
LEVELS = [Level.QUICK, Level.FULL]
BUILDS = ("all_reduce_perf", "sendrecv_perf", "alltoall_perf", "gpu_burn", "nvbandwidth")
BURN_S = 7  # settings["burn_s"]: small, so that a wrong "Burning for" shows
# What a usage error of each tool looks like (the tools' option parsers: nccl-tests
# src/common.cu, perftest src/perftest_parameters.c).
GPU_BURN_TRAPS = ("-h", "-l", "-d", "-tc")  # see TRAPS below
NCCL_USAGE = ("USAGE:", "invalid option", "invalid size", "unrecognized option")
PERFTEST_USAGE = ("unrecognized option", "Invalid Command or flag")


# -- the built tools and the planner's steps ----------------------------------------------


def built() -> dict[str, Path]:
    """Program name -> path of what dev/tools.py built (its tools.json)."""
    manifest = TOOLS_DIR / "tools.json"
    if not manifest.is_file():
        pytest.skip(f"no built tools in {TOOLS_DIR}: {BUILD_HINT}")
    tools = json.loads(manifest.read_text()).get("tools") or {}
    return {name: TOOLS_DIR / rel for name, rel in tools.items()
            if (TOOLS_DIR / rel).is_file()}


def need(name: str) -> Path:
    path = built().get(name)
    if path is None:
        pytest.skip(f"{name} is not built in {TOOLS_DIR}: {BUILD_HINT}")
    return path


def settings(tools: Mapping[str, Path]) -> dict[str, Any]:
    return {"tools": {name: str(path) for name, path in tools.items()}, "burn_s": BURN_S}


def inventory(gpus: int = 8, cuda: bool | None = None,
              tools: Mapping[str, Path] | None = None) -> Inventory:
    """Eight GPUs and two compute rails; ``cuda``: whether perftest takes ``--use_cuda``;
    gpu_burn's compare file found the way ``take`` finds it on a node, from ``tools``."""
    inv = Inventory(gpus=list(range(gpus)), rails=[Rail("mlx5_0", 1, 0), Rail("mlx5_3", 1, 1)],
                    perftest_cuda=cuda)
    if tools is not None:
        inv.gpu_burn_compare, why = compare_file(
            "localhost", command_runner("local"), settings(tools)["tools"], 10)
        assert why is None, why
    return inv


def steps(tool: str, level: Level, tools: Mapping[str, Path], inv: Inventory | None = None
          ) -> list[Step]:
    found = [s for s in node_steps(inv or inventory(tools=tools), level, settings(tools),
                                   frozenset(NODE_TESTS)) if s.tool == tool]
    assert found, f"the planner issues no {tool} step at {level} (tests {NODE_TESTS})"
    return found


def real_argv(argv: Sequence[str], tools: Mapping[str, Path]) -> list[str]:
    """The planner's command line with its program replaced by the built binary."""
    program = Path(argv[0]).name
    if program not in BUILDS:
        pytest.fail(f"the planner runs {program}, which dev/tools.py does not build")
    if program not in tools:
        pytest.skip(f"{program} is not built in {TOOLS_DIR}: {BUILD_HINT}")
    return [str(tools[program]), *argv[1:]]


def run(argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, errors="replace",
                          timeout=timeout, check=False, cwd=cwd,
                          env={**os.environ, "LC_ALL": "C", **(env or {})})


def judged(step: Step, argv: Sequence[str], proc: subprocess.CompletedProcess[str]
           ) -> tuple[str | None, ToolRun, list[Finding]]:
    """What qualify makes of this output: the parser detected, the run, its findings."""
    text = proc.stdout + "\n" + proc.stderr
    tool_run = ToolRun(step.tool, "node", step.test, " ".join(argv), proc.returncode)
    parsers.parse(step.tool, text, tool_run)
    return parsers.detect(text), tool_run, run_findings(tool_run)


def names_cause(finding: Finding, causes: Sequence[str]) -> bool:
    said = f"{finding.message} {finding.observed}".lower()
    return any(c.lower() in said for c in causes)


def shown(findings: Sequence[Finding]) -> str:
    return "; ".join(f"{f.status} {f.action} {f.message!r} ({f.observed!r})" for f in findings)


# -- a stand-in driver: libcuda.so.1 and libnvidia-ml.so.1 that find no GPU ----------------

_FAKE_CUDA = """/* stand-in for "driver installed, no GPU": not NVIDIA's text */
typedef int CUresult;
static const char *text(CUresult r) {
  return r == 100 ? "no CUDA-capable device is detected" : r == 3 ? "initialization error"
       : "unknown error"; }
static const char *name(CUresult r) {
  return r == 100 ? "CUDA_ERROR_NO_DEVICE" : r == 3 ? "CUDA_ERROR_NOT_INITIALIZED"
       : "CUDA_ERROR_UNKNOWN"; }
CUresult cuInit(unsigned int f) { (void)f; return 100; }
CUresult cuGetErrorString(CUresult r, const char **s) { *s = text(r); return 0; }
CUresult cuGetErrorName(CUresult r, const char **s) { *s = name(r); return 0; }
CUresult cuDriverGetVersion(int *v) { *v = 13000; return 0; }
"""
_OWN = {"cuInit", "cuGetErrorString", "cuGetErrorName", "cuDriverGetVersion",
        "nvmlErrorString"}


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with the stand-in driver libraries, every entry point the built programs
    import answering an error (CUDA: not initialised; NVML: driver not loaded)."""
    programs = [p for n, p in built().items() if n in ("gpu_burn", "nvbandwidth")]
    if not programs or not shutil.which("gcc") or not shutil.which("nm"):
        pytest.skip("the stand-in driver needs gcc, nm and a built gpu_burn or nvbandwidth")
    listed = run(["nm", "-D", "--undefined-only", *map(str, programs)]).stdout
    symbols = {line.split()[-1].split("@")[0] for line in listed.splitlines() if line.strip()}
    folder = tmp_path_factory.mktemp("fakedrv")
    cuda = _FAKE_CUDA + "".join(f"CUresult {s}(void) {{ return 3; }}\n" for s in sorted(
        symbols) if re.match(r"cu[A-Z]", s) and s not in _OWN)
    nvml = ('const char *nvmlErrorString(int r) { return r == 9 ? "Driver Not Loaded" '
            ': "Unknown Error"; }\n') + "".join(
        f"int {s}(void) {{ return 9; }}\n" for s in sorted(symbols)
        if re.match(r"nvml[A-Z]", s) and s not in _OWN)
    for soname, source in (("libcuda.so.1", cuda), ("libnvidia-ml.so.1", nvml)):
        (folder / f"{soname}.c").write_text(source)
        subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(folder / soname),
                        f"-Wl,-soname,{soname}", str(folder / f"{soname}.c")], check=True)
    return folder


# -- nccl-tests ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
def test_nccl_tests_accept_every_planned_command_line(level: Level) -> None:
    """nccl-tests exits 0 after printing its usage for a bad option or a missing value
    (common.cu): a usage error is only seen in the text."""
    tools = built()
    problems = []
    for step in steps("nccl-tests", level, tools):
        argv = real_argv(step.argv, tools)
        proc = run(argv, dict(step.env))
        text = proc.stdout + proc.stderr
        said = [u for u in NCCL_USAGE if u in text]
        if said or proc.returncode == 127:
            problems.append(f"{step.test}: {' '.join(argv)} -> exit {proc.returncode}, "
                            f"{said or 'cannot load'}: {text[-400:]}")
        elif "# nThread" not in text:
            problems.append(f"{step.test}: no parameter line: {text[-400:]}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("level", LEVELS)
def test_nccl_tests_no_gpu_failure_is_an_error_naming_cause(level: Level) -> None:
    """No GPU here: each run fails at CUDA's initialisation (``Test CUDA failure
    util.cu:NNN 'CUDA driver version is insufficient ...'``, exit 2). qualify must call
    that an error of the run naming CUDA or NCCL: never a pass, never a drain."""
    tools = built()
    problems = []
    for step in steps("nccl-tests", level, tools):
        argv = real_argv(step.argv, tools)
        proc = run(argv, dict(step.env))
        if proc.returncode == 0:
            pytest.skip("nccl-tests ran to completion: this machine has a GPU")
        detected, _, findings = judged(step, argv, proc)
        wrong = [f for f in findings if f.status in (Status.PASS, Status.FAIL)
                 or f.action is Action.DRAIN]
        named = [f for f in findings if f.status is Status.ERROR
                 and names_cause(f, ("CUDA", "NCCL"))]
        if detected != "nccl-tests" or wrong or not named:
            problems.append(f"{step.test} (exit {proc.returncode}, detected {detected}): "
                            f"{shown(findings) or 'no finding'}")
    assert not problems, "\n".join(problems)


# -- gpu-burn -----------------------------------------------------------------------------

_VALUED = ("-c", "-m", "-i", "-stts")


def _asked_seconds(argv: Sequence[str]) -> str:
    bare = [a for i, a in enumerate(argv[1:], 1) if a.isdigit() and argv[i - 1] not in _VALUED]
    assert len(bare) == 1, f"expected one bare number (the seconds) in {argv}"
    return bare[0]


def _printed_back(text: str) -> tuple[set[str], set[str]]:
    files = set(re.findall(r"Using compare file: (.*)", text))
    seconds = set(re.findall(r"Burning for (-?\d+) seconds\.", text))
    return files, seconds


def _check_burn(step: Step, argv: list[str], fake: Path, cwd: Path) -> list[str]:
    """What gpu_burn printed back against what the planner asked; problems found."""
    if "-c" not in argv[:-1]:
        return [f"{' '.join(argv)}: no -c: gpu_burn would read compare.fatbin from its "
                f"working directory, which is not its build folder"]
    compare = argv[argv.index("-c") + 1]
    seconds = _asked_seconds(argv)
    proc = run(argv, {**dict(step.env), "LD_LIBRARY_PATH": str(fake)}, cwd=cwd)
    text = proc.stdout + proc.stderr
    files, burns = _printed_back(text)
    problems = []
    if files != {compare}:
        trap = [t for t in GPU_BURN_TRAPS if t in compare]
        problems.append(f"asked -c {compare}, gpu_burn used {sorted(files) or 'none'}"
                        + (f" (the path holds {trap}, which gpu_burn reads as options)"
                           if trap else ""))
    if burns != {seconds}:
        problems.append(f"asked {seconds} s, gpu_burn said {sorted(burns) or 'nothing'}")
    if "Run length not specified" in text:
        problems.append("gpu_burn did not find the seconds")
    return [f"{' '.join(argv)} (exit {proc.returncode}): {p}\n{text[-300:]}" for p in problems]


@pytest.mark.parametrize("level", LEVELS)
def test_gpu_burn_prints_back_the_planned_compare_file_and_seconds(
        level: Level, fake_driver: Path, tmp_path: Path) -> None:
    tools = built()
    need("gpu_burn")
    problems = []
    for step in steps("gpu_burn", level, tools):
        argv = real_argv(step.argv, tools)
        problems += _check_burn(step, argv, fake_driver, tmp_path)
        if "-c" in argv[:-1]:
            given = Path(argv[argv.index("-c") + 1])
            if given.resolve() != need("gpu_burn_compare").resolve():
                problems.append(f"-c {given}: not the built {need('gpu_burn_compare')}")
    assert not problems, "\n".join(problems)


# The trap, run for real: gpu_burn tests every argument for the substrings -h, -l, -d and
# -tc (strstr, gpu_burn-drv.cpp), the -c path included. Each folder name holds one.
TRAPS = {
    "my-home": "help text, exit 0, no burn",  # -h
    "tools-dir": "'Run length not specified', burns 10 s instead",  # -d
    "gpu-libs": "lists GPUs (none here: aborts)",  # -l
}


@pytest.mark.parametrize("folder", sorted(TRAPS))
def test_gpu_burn_misreads_a_compare_path_holding_an_option(
        folder: str, fake_driver: Path, tmp_path: Path) -> None:
    """Documents the real binary: ``-c <path>`` with a trap in the path is misread."""
    where = tmp_path / folder
    where.mkdir()
    shutil.copy2(need("gpu_burn_compare"), where / "compare.fatbin")
    argv = [str(need("gpu_burn")), "-d", "-tc", "-c", str(where / "compare.fatbin"), "5"]
    proc = run(argv, {"LD_LIBRARY_PATH": str(fake_driver)}, cwd=tmp_path)
    text = proc.stdout + proc.stderr
    _, burns = _printed_back(text)
    if folder == "my-home":
        assert proc.returncode == 0, text
        assert "Usage: gpu-burn" in text
        assert not burns, text
    elif folder == "tools-dir":
        assert "Run length not specified" in text, text
        assert burns == {"10"}, text
    else:
        assert not burns, text
        assert proc.returncode != 0, text


@pytest.mark.parametrize("folder", sorted(TRAPS))
def test_planner_gpu_burn_survives_a_trap_in_its_path(
        folder: str, fake_driver: Path, tmp_path: Path) -> None:
    """gpu_burn installed under a folder whose name holds a trap: the planner either
    refuses it (a usage/config error naming it) or lays the command out so that the real
    binary still prints back the compare file and seconds asked."""
    where = tmp_path / folder
    where.mkdir()
    for name in ("gpu_burn", "gpu_burn_compare"):
        shutil.copy2(need(name), where / need(name).name)
    tools = {**built(), "gpu_burn": where / "gpu_burn",
             "gpu_burn_compare": where / "compare.fatbin"}
    try:
        planned = [s for s in node_steps(inventory(tools=tools), Level.QUICK,
                                         settings(tools), frozenset(NODE_TESTS))
                   if s.tool == "gpu_burn"]
    except (ClusterdiagError, ValueError) as exc:
        refused = str(exc)
        planned = []
    else:
        refused = " ".join(s.error for s in planned if s.error)
    if refused:
        assert folder in refused, refused
        return
    problems = []
    for step in planned:
        problems += _check_burn(step, list(step.argv), fake_driver, tmp_path)
    assert not problems, f"{TRAPS[folder]}:\n" + "\n".join(problems)


# -- nvbandwidth --------------------------------------------------------------------------


def test_nvbandwidth_knows_every_planned_testcase(fake_driver: Path) -> None:
    """``nvbandwidth -l`` names its testcases; an unknown ``-t`` name is only an
    ``ERROR: Testcase X not found!`` line, after CUDA initialised (not reachable here)."""
    nvbandwidth = need("nvbandwidth")
    tools = built()
    env = {"LD_LIBRARY_PATH": str(fake_driver)}
    listed = run([str(nvbandwidth), "-l"], env)
    known = set(re.findall(r"^\d+,\s*(\S+?):", listed.stdout, re.M))
    assert known, listed.stdout + listed.stderr
    problems = []
    for level in LEVELS:
        for step in steps("nvbandwidth", level, tools):
            argv = real_argv(step.argv, tools)
            cases = [a for a in argv[1:] if not a.startswith("-")]
            problems += [f"{level}: unknown testcase {c}" for c in cases if c not in known]
            proc = run(argv, env)
            text = proc.stdout + proc.stderr
            if "Invalid Arguments" in text or "cannot specify" in text:
                problems.append(f"{' '.join(argv)}: {text[-300:]}")
    assert not problems, "\n".join(problems)


# -- perftest (Debian's, without CUDA) ----------------------------------------------------


def _perftest() -> str:
    found = shutil.which("ib_write_bw")
    if found is None:
        pytest.skip("ib_write_bw not installed (apt-get install perftest)")
    return found


def _without_cuda(program: str) -> None:
    helped = run([program, "--help"], timeout=10)
    if "use_cuda" in helped.stdout + helped.stderr:
        pytest.skip(f"{program} is built with CUDA: it takes --use_cuda")


def _nic_argvs(step: Step, program: str) -> Iterator[tuple[str, list[str]]]:
    for half, argv in (("server", step.server_argv), ("client", step.argv)):
        if argv is not None:
            yield half, [program, *argv[1:]]


def test_perftest_accepts_the_planned_host_memory_command_line() -> None:
    """Debian's ib_write_bw has no --use_cuda; the planner must pass it only where the
    installed perftest takes it. With no RDMA device here, a command line that parses
    ends at ``Did not detect devices`` (exit 1)."""
    program = _perftest()
    _without_cuda(program)
    problems = []
    for step in steps("perftest", Level.QUICK, {}, inventory(cuda=False)):
        for half, argv in _nic_argvs(step, program):
            if any(a.startswith("--use_cuda") for a in argv):
                problems.append(f"{half}: {' '.join(argv)} passes --use_cuda to a perftest "
                                f"built without CUDA")
                argv = [a for a in argv if not a.startswith("--use_cuda")]
            proc = run(argv, timeout=15)
            text = proc.stdout + proc.stderr
            if any(u in text for u in PERFTEST_USAGE):
                problems.append(f"{half}: {' '.join(argv)}: {text[:300]}")
    assert not problems, "\n".join(problems)


def _refusal(program: str) -> tuple[Step, list[str], subprocess.CompletedProcess[str]]:
    """The planner's client command line for a CUDA-capable perftest, run on Debian's."""
    step = steps("perftest", Level.QUICK, {}, inventory(cuda=True))[0]
    argv = [program, *step.argv[1:]]
    if not any(a.startswith("--use_cuda") for a in argv):
        argv.insert(-1, "--use_cuda=0")  # the planner left it out: ask as a CUDA build would
    return step, argv, run(argv, timeout=15)


def test_perftest_without_cuda_refuses_use_cuda() -> None:
    """Documents Debian's perftest 4.5: getopt's refusal, its own complaint, exit 1."""
    program = _perftest()
    _without_cuda(program)
    _, _, proc = _refusal(program)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text
    assert "unrecognized option '--use_cuda" in text
    assert "Invalid Command or flag" in text


def test_perftest_use_cuda_refusal_is_not_a_node_fault() -> None:
    """The refusal says the tool lacks CUDA, not that the NIC is bad: qualify reports an
    error naming the missing CUDA support (or falls back to host memory, saying so)."""
    program = _perftest()
    _without_cuda(program)
    step, argv, proc = _refusal(program)
    _, tool_run, findings = judged(step, argv, proc)
    fallback = any("host memory" in n for n in tool_run.notes)
    wrong = [f for f in findings if f.status is Status.FAIL or f.action is Action.DRAIN]
    named = [f for f in findings if f.status in (Status.ERROR, Status.SKIP)
             and names_cause(f, ("cuda",))]
    assert not wrong, shown(findings)
    assert named or fallback, shown(findings) or "no finding"


# -- ibstat over a simulated node's /sys --------------------------------------------------

PLATFORMS = ["dgx-h100", "dgx-a100"]


def _namespaces() -> None:
    if shutil.which("ibstat") is None:
        pytest.skip("ibstat not installed (apt-get install infiniband-diags)")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("mounting a simulated /sys needs root and unshare")
    probe = run(["unshare", "-m", "true"], timeout=10)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m refused here: {probe.stderr.strip()}")


def _simulated(platform: str) -> tuple[Path, str]:
    """A simulated node's filesystem tree and its stand-in ibstat's output."""
    from clusterdiag.agent.sim.node import build, make_root
    from clusterdiag.agent.sim.spec import NodeSpec
    from clusterdiag.agent.sim.tools import SimTools

    node = build(NodeSpec("n1", platform))
    stand_in = SimTools({"n1": node})("n1", ["ibstat"], {}, 10)
    assert stand_in.returncode == 0, stand_in
    return make_root(node), stand_in.stdout


def _real_ibstat(root: Path) -> subprocess.CompletedProcess[str]:
    """Debian's ibstat reading ``root/sys`` as /sys. The whole /sys is replaced:
    /sys/class/infiniband's entries are relative links into /sys/devices, and sysfs has
    no /sys/class/infiniband to mount on where the machine has no RDMA device."""
    return run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount --bind "$0/sys" /sys && exec ibstat', str(root)], timeout=30)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_real_ibstat_reads_the_simulated_tree(platform: str) -> None:
    """libibumad reads each port's ``pkeys/`` too: without it ibstat 44 gives up on the
    whole listing (``ibpanic: stat of IB device ... failed``, exit 255)."""
    _namespaces()
    root, _ = _simulated(platform)
    proc = _real_ibstat(root)
    assert proc.returncode == 0, proc.stderr
    assert "ibpanic" not in proc.stderr
    assert "ibwarn" not in proc.stderr
    assert proc.stdout.startswith("CA '")


def _normal(text: str) -> list[str]:
    """Lines with the numbers of their values aside (GUIDs, LIDs, rates, masks, firmware);
    names (``CA 'mlx5_10'``, ``Port 1:``) and words (states, link layers) kept."""
    out = []
    for line in text.splitlines():
        key, colon, value = line.partition(":")
        if colon and value.strip() and not line.lstrip().startswith("CA '"):
            value = re.sub(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)*", "N", value)
        out.append(key + colon + value)
    return out


@pytest.mark.parametrize("platform", PLATFORMS)
def test_real_ibstat_prints_what_the_stand_in_prints(platform: str) -> None:
    """Line by line, numbers aside. Real ibstat lists the CAs in strcmp order (mlx5_0,
    mlx5_1, mlx5_10, ...). Ports lacking ``pkeys/`` get one here (the test above holds
    the tree to that), so that this one judges the text alone."""
    _namespaces()
    root, stand_in = _simulated(platform)
    for port in (root / "sys/class/infiniband").glob("*/ports/*"):
        if not (port / "pkeys").exists():
            (port / "pkeys").mkdir()
            (port / "pkeys" / "0").write_text("0xffff\n")
    proc = _real_ibstat(root)
    assert proc.returncode == 0, proc.stderr
    real, ours = _normal(proc.stdout), _normal(stand_in)
    if real != ours:
        diff = difflib.unified_diff(real, ours, "real ibstat", "stand-in", n=1, lineterm="")
        pytest.fail("\n".join(list(diff)[:60]))
