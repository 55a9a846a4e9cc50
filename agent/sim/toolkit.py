"""What the simulated active-test tools share: what one run printed, where each tool is
installed on a simulated node, the dynamic loader's refusal and C's ``atoi``.

Install places (no real node fixes them; these are what a site commonly does, and what
``which`` and ``readlink -f`` answer on a simulated node, agent/sim/host_tools.py): the
distribution's packages in /usr/bin and /usr/sbin (perftest, infiniband-diags, the driver's
nvidia-smi, DCGM), the tools built from source each in its own folder under /opt with a
/usr/local/bin link, as their READMEs build them: gpu-burn's Makefile writes ``gpu_burn``
and ``compare.fatbin`` into the build folder, nccl-tests' into ``build/``, nvbandwidth's
CMake into its build folder.
"""

from __future__ import annotations

from dataclasses import dataclass

# Where `which NAME` finds each tool, and where that path leads (readlink -f).
INSTALLED: dict[str, tuple[str, str]] = {
    "all_reduce_perf": ("/usr/local/bin/all_reduce_perf", "/opt/nccl-tests/build/all_reduce_perf"),
    "nvbandwidth": ("/usr/local/bin/nvbandwidth", "/opt/nvbandwidth/nvbandwidth"),
    "gpu_burn": ("/usr/local/bin/gpu_burn", "/opt/gpu-burn/gpu_burn"),
    "ib_write_bw": ("/usr/bin/ib_write_bw", "/usr/bin/ib_write_bw"),
    "ibstat": ("/usr/sbin/ibstat", "/usr/sbin/ibstat"),
    "nvidia-smi": ("/usr/bin/nvidia-smi", "/usr/bin/nvidia-smi"),
    "dcgmi": ("/usr/bin/dcgmi", "/usr/bin/dcgmi"),
    # Debian's openmpi-bin: mpirun is an alternatives link to Open MPI's launcher.
    "mpirun": ("/usr/bin/mpirun", "/usr/bin/mpirun.openmpi"),
}
# gpu-burn's Makefile builds compare.fatbin beside gpu_burn (its `%.fatbin: %.cu` rule).
GPU_BURN_COMPARE = "/opt/gpu-burn/compare.fatbin"
# The working directory of a command run over ssh (the login's home) or srun (the caller's
# directory, which is not a tool's build folder either).
WORKING_DIRECTORY = "/root"
# The shared libraries each tool's ELF needs that a node may lack (NEEDED of the builds
# against CUDA 13 in the research notes, /tmp/notes/qualify_tools.md §4: nccl-tests links
# libnccl.so.2 with no rpath and cudart statically; nvbandwidth needs libnvidia-ml.so.1
# and libcuda.so.1; gpu_burn libcuda.so.1 and cuBLAS, the latter through an rpath).
NEEDED: dict[str, tuple[str, ...]] = {
    "all_reduce_perf": ("libnccl.so.2",),
    "nvbandwidth": ("libnvidia-ml.so.1", "libcuda.so.1"),
    "gpu_burn": ("libcuda.so.1", "libcublas.so.13"),
}


class NotModelled(Exception):
    """An argument or case whose output a stand-in does not simulate: the run is refused
    as the simulator's limit, never answered with output the real tool would not print."""


@dataclass
class Printed:
    """What one run of a tool printed, its exit status and, where the stand-in knows it,
    how long the real run would have taken (seconds; None: read from the output)."""

    stdout: str
    stderr: str = ""
    code: int = 0
    seconds: float | None = None


def every_file(tool: str) -> set[str]:
    """The paths that exist on a simulated node for ``tool`` (links included)."""
    link, target = INSTALLED[tool]
    return {link, target} | ({GPU_BURN_COMPARE} if tool == "gpu_burn" else set())


def resolve(path: str) -> str | None:
    """``readlink -f``: a tool's link to its target, an existing file to itself."""
    for link, target in INSTALLED.values():
        if path in (link, target):
            return target
    return path if path == GPU_BURN_COMPARE else None


def loader_error(argv0: str, library: str) -> Printed:
    """ld.so's refusal, as the real runs print it (research runs/nccl_all_reduce_noldpath.txt,
    gpuburn_nodriver_plan.txt, nvb_nodriver_local.txt): argv[0] as invoked, exit 127."""
    return Printed("", f"{argv0}: error while loading shared libraries: {library}: cannot "
                       "open shared object file: No such file or directory\n", 127)


def atoi(text: str) -> int:
    """C's atoi: leading blanks, a sign, then digits; 0 where there are none."""
    stripped = text.lstrip(" \t\n\v\f\r")
    sign, digits = 1, ""
    if stripped[:1] in ("+", "-"):
        sign, stripped = (-1 if stripped[0] == "-" else 1), stripped[1:]
    for char in stripped:
        if not char.isdigit():
            break
        digits += char
    return sign * int(digits) if digits else 0
