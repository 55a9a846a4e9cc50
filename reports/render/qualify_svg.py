"""The two pictures of the tests between nodes, as inline SVG (no script, no external
reference, so the HTML report stays one self-contained file): the pair heatmap and the
scaling curve (Ring and NCCL's default busbw against the node count, the fail line of the
Ring efficiency, the size where it breaks).

The heatmap has one cell per pair that ran (either pass), coloured by its worst run, so a
slow node shows as the row and column whose cells are red with every partner. Up to
``MAX_NODES_SHOWN`` nodes each node is a row; beyond that, what a screen can show, the nodes
are binned in name order (rack order) into at most that many bins, a cell holding the
lowest figure and the worst status of the pairs between its two bins, and a bin holding a
convicted node is marked: the picture stays a few kilobytes at any N. Node names come from
the cluster: shown inert and escaped."""

from __future__ import annotations

import html
import math
from collections.abc import Collection
from dataclasses import dataclass, field

from ...agent.base.inert import shown
from ...checks.core.finding import Status
from ...checks.qualify.cross import Graded, ScalingPoint
from ..model.qualify import natural_key
from .qualify_words import folded

HEAT_PASS = "#2e7d32"
HEAT_WARN = "#f9a825"
HEAT_FAIL = "#b3261e"
UNTESTED = "#eceff1"
RING = "#1565c0"
DEFAULT = "#8e24aa"
MAX_NODES_SHOWN = 64  # rows a screen shows readably; beyond it, nodes are binned
LABEL_CHARS = 24
_SEVERITY = {Status.PASS: 0, Status.WARN: 1}


def _e(value: object) -> str:
    return html.escape(shown(value), quote=True)


def _colour(status: Status) -> str:
    return {Status.PASS: HEAT_PASS, Status.WARN: HEAT_WARN}.get(status, HEAT_FAIL)


def _runs(graded: list[Graded], test: str) -> list[Graded]:
    return [g for g in graded if g.run.test == test and len(g.run.nodes) == 2
            and g.run.stage in ("first", "second", "odd")]


def _bins(nodes: list[str]) -> list[list[str]]:
    """Consecutive nodes in name order, one per bin up to MAX_NODES_SHOWN, else at most
    MAX_NODES_SHOWN bins of equal size."""
    per = max(1, math.ceil(len(nodes) / MAX_NODES_SHOWN))
    return [nodes[i:i + per] for i in range(0, len(nodes), per)]


@dataclass
class _Cell:
    """The pairs between two bins: the worst run, the lowest figure, how many."""

    worst: Graded
    lowest: float | None = None
    runs: int = 0
    statuses: dict[Status, int] = field(default_factory=dict)

    def add(self, g: Graded) -> None:
        self.runs += 1
        self.statuses[g.status] = self.statuses.get(g.status, 0) + 1
        if _SEVERITY.get(g.status, 2) > _SEVERITY.get(self.worst.status, 2):
            self.worst = g
        if g.value is not None and not g.failed:
            self.lowest = g.value if self.lowest is None else min(self.lowest, g.value)


def legend(graded: list[Graded], test: str) -> str:
    """What a cell of the heatmap of ``test`` stands for."""
    nodes = {n for g in _runs(graded, test) for n in g.run.nodes}
    if len(nodes) <= MAX_NODES_SHOWN:
        return ("one cell per pair that ran, either pass: green pass, amber warn, red fail; "
                "a marked row holds a convicted node")
    per = len(_bins(sorted(nodes, key=natural_key))[0])
    return (f"{len(nodes):,} nodes binned by {per} in name order: a cell is the pairs "
            "between two bins, coloured by the worst, with the lowest figure; a marked "
            "row holds a convicted node")


def _tip(cell: _Cell, rows: list[str], columns: list[str]) -> str:
    g = cell.worst
    a, b = g.run.nodes
    value = "a failed run" if g.value is None or g.failed else f"{g.value:.1f} {g.unit}"
    worst = f"{a}–{b} {g.component}: {value}, {g.run.stage} pass, round {g.run.round}" \
        f"{'; ' + g.why if g.why else ''}"
    if len(rows) == 1 and len(columns) == 1:
        return worst
    lowest = "-" if cell.lowest is None else f"{cell.lowest:.1f} {g.unit}"
    counts = ", ".join(f"{n} {s.value}" for s, n in sorted(cell.statuses.items(),
                                                          key=lambda kv: kv[0].rank))
    return (f"{folded(rows)} × {folded(columns)}: {cell.runs} run(s) ({counts}), lowest "
            f"{lowest}; worst {worst}")


def pair_heatmap(graded: list[Graded], test: str = "pairs",
                 convicted: Collection[str] = ()) -> str:
    """The heatmap of one pairing test's runs (both passes), or "" when none ran."""
    runs = _runs(graded, test)
    if not runs:
        return ""
    bins = _bins(sorted({n for g in runs for n in g.run.nodes}, key=natural_key))
    index = {n: i for i, members in enumerate(bins) for n in members}
    cells: dict[tuple[int, int], _Cell] = {}
    for g in runs:
        a, b = (index[n] for n in g.run.nodes)
        for key in {(a, b), (b, a)}:
            cell = cells.setdefault(key, _Cell(g))
            cell.add(g)
    labels = [members[0] if len(members) == 1 else folded(members) for members in bins]
    marked = [any(n in convicted for n in members) for members in bins]
    count = len(bins)
    cell_px = max(8, min(18, 640 // count))
    label = 16 + 7 * min(max(len(shown(t)) for t in labels), LABEL_CHARS)
    size = label + cell_px * count
    font = min(cell_px, 12)
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' class=heatmap width='{size + 10}' "
             f"height='{size + 10}' role='img' aria-label='{_e(test)} heatmap'>",
             f"<rect x='{label}' y='{label}' width='{cell_px * count}' "
             f"height='{cell_px * count}' fill='{UNTESTED}'/>"]
    for i, text in enumerate(labels):
        at = label + i * cell_px + cell_px * 0.75
        colour = f" fill='{HEAT_FAIL}' font-weight='bold'" if marked[i] else ""
        name = _e(shown(text)[:LABEL_CHARS])
        parts.append(f"<text x='{label - 4}' y='{at:.1f}' font-size='{font}' "
                     f"text-anchor='end'{colour}>{name}</text>")
        parts.append(f"<text transform='translate({at:.1f},{label - 4}) rotate(-90)' "
                     f"font-size='{font}'{colour}>{name}</text>")
        if marked[i]:
            middle = label + i * cell_px + cell_px / 2
            parts.append(f"<circle cx='6' cy='{middle:.1f}' r='4' fill='{HEAT_FAIL}'>"
                         f"<title>{_e(folded(bins[i]))} holds a convicted node</title></circle>")
    for (row, column), cell in sorted(cells.items(), key=lambda kv: _SEVERITY.get(
            kv[1].worst.status, 2)):  # the worst drawn last, on top
        tip = _e(_tip(cell, bins[row], bins[column]))
        parts.append(f"<rect x='{label + column * cell_px}' y='{label + row * cell_px}' "
                     f"width='{cell_px - 1}' height='{cell_px - 1}' "
                     f"fill='{_colour(cell.worst.status)}'><title>{tip}</title></rect>")
    parts.append("</svg>")
    return "".join(parts)


def efficiency_pct(point: ScalingPoint) -> str:
    return "-" if point.efficiency is None else f"{100 * point.efficiency:.1f} %"


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
    broken = next((p for p in measured if p.status is Status.FAIL and p.ring is not None),
                  None)
    if broken is not None and broken.ring is not None:
        parts.append(f"<text x='{x(broken.nodes):.1f}' y='{y(broken.ring) + 22:.1f}' "
                     f"font-size='12' text-anchor='middle' fill='{HEAT_FAIL}'>breaks at "
                     f"{broken.nodes}: {efficiency_pct(broken)}</text>")
    parts.append(f"<text x='{width - right - 150}' y='{top + 12}' font-size='12' "
                 f"fill='{RING}'>NCCL_ALGO=Ring</text>")
    parts.append(f"<text x='{width - right - 150}' y='{top + 28}' font-size='12' "
                 f"fill='{DEFAULT}'>NCCL default</text>")
    parts.append("</svg>")
    return "".join(parts)
