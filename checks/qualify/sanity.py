"""Figures no measurement can give: negative, NaN, infinite, or above what the hardware can
physically move. Such a figure says the tool, its build, its timer or our reading of its
output went wrong — never how fast the node is — so it is an ``error`` naming where it was
read (``file:line`` of a saved log, the tool and node of a live run), never judged against
a floor or the peers (where one NaN or 10^308 would also poison the median).

The ceiling of each test comes from the platform's profile, with its source:

* nccl-tests bus bandwidth (every all-reduce test, between nodes too) and nvbandwidth's
  device-to-device copy: the GPU's NVLink bandwidth, both directions together (links per
  GPU x the per-link rate of its NVLink generation). An all-reduce moves every byte into
  and out of each GPU at least once: even NVLS, whose switch reduces in-network, gives a
  bus bandwidth below twice the one-direction rate.
* nvbandwidth's ``device_local_copy`` (``hbm``): the GPU's HBM peak (read and write
  together, NVIDIA's datasheet figure). A copy reads and writes each byte, so its copy rate
  is at most half of it: the ceiling holds whichever unit a figure was counted in.
* host to device and back: the GPU's PCIe link (generation x width, before encoding), or
  NVLink-C2C on Grace parts.
* perftest (``nic``, ``rails``): the compute NIC's line rate (``hca_rate_gbps``).

Where the profile holds no such fact (gpu_burn's Gflop/s, a site profile without NVLink
data), the ceiling is ten times the profile's expected figure or floor for the test, and
without one either, a per-unit bound beyond any part made (:data:`UNIVERSAL`). Every
ceiling gets a 10 % margin (:data:`MARGIN`): no healthy part reaches its line rate, but a
tool's clock can make it look so — a real ``ib_write_bw`` on an HDR (200 Gb/s) port
printed 24056.72 MiB/s, 201.8 Gb/s (tests/fixtures/real/active/07; perftest times with the
CPU's cycle counter, perftest_parameters.c:3377-3381) — and the margin keeps such a figure,
or a rounding, from being called impossible.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...agent.model.qualify import Evidence, Expectation, Figure, ToolRun
from ..profiles.profile import Profile, UnknownProfileError, load_profile

MARGIN = 0.10
# Per-link NVLink bandwidth, both directions, GB/s, by NVML's nvmlNvlinkVersion_t (the
# profiles' nvlink_version): NVLink 1 (P100) 160 GB/s over 4 links; 2 and 2.2 (V100)
# 300 GB/s over 6; 3 and 3.1 (A100) 600 GB/s over 12; 4 (H100, H200) 900 GB/s over 18;
# 5 (B200, GB200, GB300) 1.8 TB/s over 18 (NVIDIA's NVLink page and GPU datasheets).
NVLINK_GBPS = {1: 40.0, 2: 50.0, 3: 50.0, 4: 50.0, 5: 50.0, 6: 50.0, 7: 100.0}
_NVLINK_UNKNOWN = max(NVLINK_GBPS.values())  # links counted, generation not given
# HBM peak per GPU, GB/s (read and write together), by NVML name: NVIDIA's datasheets
# (A100 40 and 80 GB SXM; H100 SXM5 and PCIe; H200; the B200 of HGX B200, 64 TB/s over 8;
# GB200 and GB300 NVL72, 576 TB/s over 72).
HBM_GBPS = {"NVIDIA A100-SXM4-40GB": 1555.0, "NVIDIA A100-SXM4-80GB": 2039.0,
            "NVIDIA H100 80GB HBM3": 3350.0, "NVIDIA H100 PCIe": 2000.0,
            "NVIDIA H200": 4800.0, "NVIDIA B200": 8000.0, "NVIDIA GB200": 8000.0,
            "NVIDIA GB300": 8000.0}
# PCIe transfer rate per lane, GT/s, by generation (PCI-SIG); one direction, GB/s, is
# GT/s x lanes / 8 before encoding (128b/130b from Gen3 on): a bound above the real rate.
PCIE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
C2C_GBPS = 450.0  # NVLink-C2C, one direction (900 GB/s both: Grace Hopper/Blackwell sheets)
_C2C_PARTS = ("GH200", "GB200", "GB300")
# Without any fact or expectation: beyond any part made, per unit of the figure.
UNIVERSAL = {"GB/s": (20000.0, "no GPU link or memory moves 20 TB/s (NVLink5: 1.8 TB/s, "
                               "HBM3e: 8 TB/s per GPU)"),
             "Gb/s": (16000.0, "no NIC port carries 16 Tb/s (XDR: 800 Gb/s)"),
             "Gflop/s": (1e8, "no GPU computes 100 Pflop/s")}
_BUSBW = ("allreduce", "allreduce_ring", "allreduce_net", "pairs", "scaling", "rack",
          "collective")


@dataclass(frozen=True)
class Ceiling:
    """The most a test's figure can physically be (margin included), and why."""

    test: str
    value: float
    unit: str
    source: str


def _nvlink(profile: Profile) -> tuple[float, str] | None:
    if not profile.nvlinks_per_gpu:
        return None
    rate = NVLINK_GBPS.get(profile.nvlink_version or 0, _NVLINK_UNKNOWN)
    total = profile.nvlinks_per_gpu * rate
    return total, (f"{profile.name}: {profile.nvlinks_per_gpu} NVLink links per GPU x "
                   f"{rate:g} GB/s (both directions) = {total:g} GB/s")


def _hbm(profile: Profile) -> tuple[float, str] | None:
    peaks = [HBM_GBPS[m] for m in profile.gpu_models if m in HBM_GBPS]
    if not peaks:
        return None
    return max(peaks), f"{profile.name}: HBM peak {max(peaks):g} GB/s (NVIDIA datasheet)"


def _host(profile: Profile) -> tuple[float, str] | None:
    if any(part in m for m in profile.gpu_models for part in _C2C_PARTS):
        return C2C_GBPS, f"{profile.name}: NVLink-C2C {C2C_GBPS:g} GB/s each way"
    if profile.gpu_pcie_gen not in PCIE_GTS:
        return None
    width = profile.gpu_pcie_width or 16
    rate = PCIE_GTS[profile.gpu_pcie_gen or 0] * width / 8
    return rate, f"{profile.name}: PCIe Gen{profile.gpu_pcie_gen} x{width} {rate:g} GB/s each way"


def _nic(profile: Profile) -> tuple[float, str] | None:
    if not profile.hca_rate_gbps:
        return None
    rate = float(profile.hca_rate_gbps)
    return rate, f"{profile.name}: compute NIC line rate {rate:g} Gb/s"


_FACTS = {**{t: ("GB/s", _nvlink) for t in (*_BUSBW, "d2d")}, "hbm": ("GB/s", _hbm),
          "h2d": ("GB/s", _host), "d2h": ("GB/s", _host), "nic": ("Gb/s", _nic),
          "rails": ("Gb/s", _nic)}


def ceiling(test: str, unit: str, profile: Profile | None, expectation: Expectation | None
            ) -> Ceiling | None:
    """The ceiling of ``test``'s figures in ``unit``: the profile's hardware fact, else ten
    times its expectation, else the universal bound of the unit; None for a unit no bound
    is known for."""
    fact = _FACTS.get(test)
    if profile is not None and fact is not None and fact[0] == unit:
        found = fact[1](profile)
        if found is not None:
            return Ceiling(test, found[0] * (1 + MARGIN), unit,
                           f"{found[1]}, +{MARGIN:.0%} margin")
    if expectation is not None and expectation.unit == unit:
        known = [v for v in (expectation.expected, expectation.floor) if v]
        if known:
            return Ceiling(test, 10 * max(known), unit,
                           f"no hardware fact for it: 10 x the profile's "
                           f"{'expected' if expectation.expected else 'floor'} {max(known):g} "
                           f"{unit} ({expectation.source})")
    if unit in UNIVERSAL:
        value, why = UNIVERSAL[unit]
        return Ceiling(test, value, unit, f"no hardware fact or expectation: {why}")
    return None


def impossible(value: float, bound: Ceiling | None) -> str | None:
    """Why ``value`` cannot be a measurement, or None."""
    if math.isnan(value):
        return "not a number"
    if math.isinf(value):
        return "infinite"
    if value < 0:
        return "negative"
    if bound is not None and value > bound.value:
        return f"above {bound.value:g} {bound.unit}, the most it can be ({bound.source})"
    return None


def _where(run: ToolRun, figure: Figure) -> str:
    if run.from_log:
        return f"{run.source}:{figure.line}" if figure.line else run.source
    line = f", line {figure.line} of its output" if figure.line else ""
    return f"{run.tool} on {run.node}{line}"


def _profile(name: str) -> Profile | None:
    try:
        return load_profile(name) if name else None
    except (UnknownProfileError, ValueError):
        return None


def screen(runs: Iterable[ToolRun], profiles: Mapping[str, str],
           expect: Mapping[str, Mapping[str, Expectation]]) -> None:
    """Take every impossible figure out of its run and put an ``impossible`` evidence line
    naming it and where it was read in its place (``profiles``: node -> profile name, as the
    judge takes them). In place, so that no report, median or JSON ever holds the number;
    screening a run twice finds nothing the second time."""
    loaded: dict[str, Profile | None] = {}
    for run in runs:
        name = profiles.get(run.node, "")
        if name not in loaded:
            loaded[name] = _profile(name)
        kept = []
        for figure in run.figures:
            bound = ceiling(figure.test, figure.unit, loaded[name],
                            expect.get(name, {}).get(figure.test))
            why = next((w for w in (impossible(v, bound) for v in figure.values) if w), None)
            if why is None:
                kept.append(figure)
                continue
            shown = ", ".join(f"{v:g}" for v in figure.values)
            run.evidence.append(Evidence(
                "impossible", figure.component,
                f"{_where(run, figure)}: {figure.test} {figure.component} {shown} "
                f"{figure.unit} ({figure.detail}): {why}", figure.test))
        run.figures = kept
