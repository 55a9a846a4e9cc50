"""nccl.library: the NCCL library is found, and at least the configured version."""

from __future__ import annotations

from collections.abc import Iterator

from ..core.finding import Action, Finding
from ..core.params import Params, param, parameters
from ..core.registry import CheckContext, check
from .helpers import NODE, nccl_info


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdecimal())


@parameters
class LibraryParams(Params):
    require_host: bool = param(
        False, doc="no libnccl.so.2 on the host fails (false: NCCL may live in the job "
        "containers)")
    min_version: str | None = param(
        None, doc="the oldest NCCL version accepted, quoted (\"2.21.5\"); null: any")


@check("nccl.library", needs=("nccl",), params=LibraryParams,
       remedy="Install NCCL on the host (libnccl2 package, or the nvidia-nccl-cu12/-cu13 "
              "wheel) or set require_host: false when NCCL ships in the job containers; a copy "
              "that does not load usually misses a dependency (ldd libnccl.so.2).",
       actions=(Action.FIX_CONFIG,))
def library(ctx: CheckContext) -> Iterator[Finding]:
    """libnccl.so.2 where a job's dynamic linker or Python would find it, and its version."""
    info = nccl_info(ctx.snapshot)
    params = LibraryParams.of(ctx)
    required = params.require_host
    copies = {lib.path: lib.version or lib.error for lib in info.libraries}
    if not info.libraries:
        if required:
            yield Finding.fail(NODE, "libnccl.so.2 not found on the host", None,
                               "libnccl.so.2 on the linker path or in a Python wheel",
                               Action.FIX_CONFIG)
        else:
            yield Finding.skip(NODE, "no libnccl.so.2 on the host (NCCL may live in the job "
                               "containers; require_host: true makes this a failure)")
        return
    first = info.libraries[0]
    if first.version is None:
        status = Finding.fail if required else Finding.warn
        yield status(NODE, "libnccl.so.2 found but its version could not be read", copies,
                     "a loadable library", Action.FIX_CONFIG)
        return
    wanted = params.min_version
    if wanted and _version_tuple(first.version) < _version_tuple(wanted):
        yield Finding.fail(NODE, "NCCL on the host is older than required", first.version,
                           f">= {wanted}", Action.FIX_CONFIG)
        return
    yield Finding.passed(NODE, f"NCCL {first.version} ({first.found_by})", copies)
