"""The two pictures of the tests between nodes, as inline SVG (no script, no external
reference, so the HTML report stays one self-contained file): the pair heatmap (one cell per
pair that ran, either pass, coloured by its figure against the reference, so a slow node
shows as the row and column whose cells are red with every partner) and the scaling curve
(Ring and NCCL's default busbw against the node count, the fail line of the Ring
efficiency, the size where it breaks). Node names come from the cluster: escaped."""

from __future__ import annotations

import html
import math
import re

from ...checks.core.finding import Status
from ...checks.qualify.cross import Graded, ScalingPoint

HEAT_PASS = "#2e7d32"
HEAT_WARN = "#f9a825"
HEAT_FAIL = "#b3261e"
UNTESTED = "#eceff1"
RING = "#1565c0"
DEFAULT = "#8e24aa"
MAX_NODES_SHOWN = 48  # beyond that the cells are too small to read; suspects come first


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _natural(name: str) -> list[tuple[int, int | str]]:
    """q2 before q10, as a node set folds them."""
    return [(0, int(part)) if part.isdigit() else (1, part)
            for part in re.split(r"(\d+)", name) if part]


def _colour(g: Graded) -> str:
    return {Status.PASS: HEAT_PASS, Status.WARN: HEAT_WARN}.get(g.status, HEAT_FAIL)


def _shown(graded: list[Graded]) -> list[str]:
    suspects = sorted({n for g in graded if g.status is not Status.PASS for n in g.run.nodes})
    rest = sorted({n for g in graded for n in g.run.nodes} - set(suspects))
    return (suspects + rest)[:MAX_NODES_SHOWN]


def pair_heatmap(graded: list[Graded], test: str = "pairs") -> str:
    """The heatmap of one pairing test's runs (both passes), or "" when none ran."""
    runs = [g for g in graded if g.run.test == test and len(g.run.nodes) == 2
            and g.run.stage in ("first", "second", "odd")]
    if not runs:
        return ""
    nodes = sorted(_shown(runs), key=_natural)
    index = {n: i for i, n in enumerate(nodes)}
    cell = max(8, min(18, 640 // max(len(nodes), 1)))
    label = 8 + 7 * min(max(len(n) for n in nodes), 24)
    size = label + cell * len(nodes)
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' class=heatmap width='{size + 10}' "
             f"height='{size + 10}' role='img' aria-label='{_e(test)} heatmap'>",
             f"<rect x='{label}' y='{label}' width='{cell * len(nodes)}' "
             f"height='{cell * len(nodes)}' fill='{UNTESTED}'/>"]
    for i, node in enumerate(nodes):
        at = label + i * cell + cell * 0.75
        parts.append(f"<text x='{label - 4}' y='{at:.1f}' font-size='{min(cell, 12)}' "
                     f"text-anchor='end'>{_e(node[:24])}</text>")
        parts.append(f"<text transform='translate({at:.1f},{label - 4}) rotate(-90)' "
                     f"font-size='{min(cell, 12)}'>{_e(node[:24])}</text>")
    severity = {Status.PASS: 0, Status.WARN: 1}
    for g in sorted(runs, key=lambda g: severity.get(g.status, 2)):  # the worst on top
        a, b = g.run.nodes
        if a not in index or b not in index:
            continue
        value = "a failed run" if g.value is None or g.failed else f"{g.value:.1f} {g.unit}"
        tip = _e(f"{a}–{b} {g.component}: {value}, {g.run.stage} pass, round {g.run.round}"
                 f"{'; ' + g.why if g.why else ''}")
        for row, column in ((a, b), (b, a)):
            parts.append(f"<rect x='{label + index[column] * cell}' "
                         f"y='{label + index[row] * cell}' width='{cell - 1}' "
                         f"height='{cell - 1}' fill='{_colour(g)}'><title>{tip}</title></rect>")
    parts.append("</svg>")
    return "".join(parts)


def scaling_curve(points: list[ScalingPoint], fail_pct: float) -> str:
    """The scaling curve, or "" when the scaling test did not run."""
    measured = [p for p in points if p.ring is not None or p.default is not None]
    if not measured:
        return ""
    width, height, left, bottom, top, right = 640, 300, 60, 40, 20, 20
    top_value = 1.1 * max(max(p.ring or 0.0, p.default or 0.0) for p in measured)
    span = max(math.log2(max(p.nodes for p in measured)) - 1.0, 1.0)

    def x(nodes: int) -> float:
        return left + (math.log2(nodes) - 1.0) / span * (width - left - right)

    def y(value: float) -> float:
        return top + (1.0 - value / top_value) * (height - top - bottom)

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' class=scaling width='{width}' "
             f"height='{height}' role='img' aria-label='scaling curve'>",
             f"<line x1='{left}' y1='{height - bottom}' x2='{width - right}' "
             f"y2='{height - bottom}' stroke='#646970'/>",
             f"<line x1='{left}' y1='{top}' x2='{left}' y2='{height - bottom}' "
             "stroke='#646970'/>",
             f"<text x='{width / 2}' y='{height - 6}' font-size='12' text-anchor='middle'>"
             "nodes</text>",
             f"<text transform='translate(14,{height / 2}) rotate(-90)' font-size='12' "
             "text-anchor='middle'>busbw (GB/s)</text>"]
    for p in measured:
        parts.append(f"<text x='{x(p.nodes):.1f}' y='{height - bottom + 16}' font-size='11' "
                     f"text-anchor='middle'>{p.nodes}</text>")
    for k in range(5):
        value = top_value * k / 4
        parts.append(f"<text x='{left - 6}' y='{y(value) + 4:.1f}' font-size='11' "
                     f"text-anchor='end'>{value:.0f}</text>")
    base = measured[0].ring
    if base:
        line = y(base * (1 - fail_pct / 100))
        parts.append(f"<line x1='{left}' y1='{line:.1f}' x2='{width - right}' y2='{line:.1f}' "
                     f"stroke='{HEAT_FAIL}' stroke-dasharray='4 4' stroke-width='1'>"
                     f"<title>{_e(f'{100 - fail_pct:g} % of the two-node Ring figure')}"
                     "</title></line>")
    dashed = " stroke-dasharray='8 4'"
    for attr, colour, dash in (("ring", RING, ""), ("default", DEFAULT, dashed)):
        xy = [(x(p.nodes), y(getattr(p, attr))) for p in measured
              if getattr(p, attr) is not None]
        if xy:
            path = " ".join(f"{a:.1f},{b:.1f}" for a, b in xy)
            parts.append(f"<polyline points='{path}' fill='none' stroke='{colour}' "
                         f"stroke-width='4'{dash}/>")
    for p in measured:
        if p.ring is not None:
            fill = HEAT_FAIL if p.status is Status.FAIL else RING
            eff = "" if p.efficiency is None else f", {100 * p.efficiency:.1f} % of 2 nodes"
            tip = _e(f"{p.nodes} nodes: Ring {p.ring:.1f} GB/s{eff}")
            parts.append(f"<circle cx='{x(p.nodes):.1f}' cy='{y(p.ring):.1f}' r='6' "
                         f"fill='{fill}'><title>{tip}</title></circle>")
    parts.append(f"<text x='{width - right - 150}' y='{top + 12}' font-size='12' "
                 f"fill='{RING}'>NCCL_ALGO=Ring</text>")
    parts.append(f"<text x='{width - right - 150}' y='{top + 28}' font-size='12' "
                 f"fill='{DEFAULT}'>NCCL default</text>")
    parts.append("</svg>")
    return "".join(parts)
