"""Which metric names and labels a PromQL expression reads, checked against an exposition.

Simple but honest: it tokenizes the expression, takes every vector selector (name and
matchers) and every label of a ``by``/``without``/``on``/``ignoring``/``group_*`` list, and
refuses what it cannot follow (an unknown function, or ``label_replace``/``label_join``/
``count_values``, which make labels out of strings) instead of letting it pass unchecked.
Labels Prometheus adds itself (``job``, ``instance``) and the series it synthesizes for a
scrape (``up``) are the only names allowed that the exposition does not show. Grafana's
``$__range``-style macros are durations; ``$var`` in a matcher value is not checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

TARGET_LABELS = frozenset({"job", "instance"})
SCRAPE_SERIES: dict[str, frozenset[str]] = {"up": frozenset()}

AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk",
                          "bottomk", "quantile", "group"})
FUNCTIONS = frozenset({"abs", "absent", "absent_over_time", "ceil", "changes", "clamp_min",
                       "clamp_max", "count_over_time", "delta", "deriv", "floor", "increase",
                       "irate", "last_over_time", "max_over_time", "min_over_time", "rate",
                       "resets", "round", "scalar", "sort", "sort_desc", "time", "timestamp",
                       "vector", "avg_over_time", "sum_over_time"})
REFUSED = frozenset({"label_replace", "label_join", "count_values"})
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
KEYWORDS = frozenset({"and", "or", "unless", "bool", "offset", "inf", "nan"})

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<range>\[[^\]]*\])
  | (?P<dur>\d+(?:ms|[smhdwy])\b|\$__\w+)
  | (?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>==|!=|=~|!~|>=|<=|[-+*/%^(){},=<>])
""", re.VERBOSE)
_LITERALS = re.compile(r"[\w.:-]+(?:\|[\w.:-]+)*")


class Unfollowable(ValueError):
    """An expression this checker cannot vouch for."""


@dataclass
class Selector:
    name: str
    matchers: list[tuple[str, str, str]] = field(default_factory=list)  # (label, op, value)


@dataclass
class Uses:
    selectors: list[Selector] = field(default_factory=list)
    grouping: set[str] = field(default_factory=set)


def _tokens(expr: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expr):
        match = _TOKEN.match(expr, pos)
        if match is None:
            raise Unfollowable(f"cannot read {expr[pos:pos + 20]!r} in {expr!r}")
        kind = match.lastgroup or ""
        if kind != "ws":
            out.append((kind, match.group()))
        pos = match.end()
    return out


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def uses(expr: str) -> Uses:
    toks = _tokens(expr)
    found = Uses()
    i = 0

    def at(j: int) -> str:
        return toks[j][1] if j < len(toks) else ""

    while i < len(toks):
        kind, text = toks[i]
        if kind == "op" and text == "{":
            raise Unfollowable(f"a selector without a metric name in {expr!r}")
        if kind != "ident":
            i += 1
            continue
        if text in GROUPING:
            i += 1
            if at(i) == "(":
                i += 1
                while at(i) not in (")", ""):
                    if toks[i][0] == "ident":
                        found.grouping.add(toks[i][1])
                    i += 1
                i += 1
            continue
        if text in KEYWORDS or text in AGGREGATIONS:
            i += 1
            continue
        if at(i + 1) == "(":
            if text in REFUSED or text not in FUNCTIONS:
                raise Unfollowable(f"function {text}() in {expr!r}")
            i += 1
            continue
        selector = Selector(text)
        i += 1
        if at(i) == "{":
            i += 1
            while at(i) not in ("}", ""):
                if at(i) == ",":
                    i += 1
                    continue
                label, op, value = toks[i:i + 3]
                if label[0] != "ident" or op[1] not in ("=", "!=", "=~", "!~") or \
                        value[0] != "str":
                    raise Unfollowable(f"matcher {label[1]}{op[1]}{value[1]} in {expr!r}")
                selector.matchers.append((label[1], op[1], _unquote(value[1])))
                i += 3
            i += 1
        found.selectors.append(selector)
    return found


Exposition = Mapping[str, list[dict[str, str]]]  # series name -> the label sets it has

_SERIES = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(texts: Iterable[str]) -> dict[str, list[dict[str, str]]]:
    series: dict[str, list[dict[str, str]]] = {}
    for text in texts:
        for line in text.splitlines():
            if line and not line.startswith("#"):
                match = _SERIES.match(line)
                if match is None:
                    raise ValueError(f"not an exposition line: {line!r}")
                labels = {k: v for k, v in _LABEL.findall(match[2] or "") if v}
                series.setdefault(match[1], []).append(labels)
    return series


def problems(expr: str, exposition: Exposition,
             recorded: Mapping[str, frozenset[str]] | None = None) -> list[str]:
    """What ``expr`` reads that ``exposition`` does not have; ``recorded`` names the series
    recording rules make and the labels they keep."""
    found = uses(expr)
    known: dict[str, frozenset[str]] = {**SCRAPE_SERIES, **(recorded or {})}
    out: list[str] = []
    labels_seen: set[str] = set(TARGET_LABELS)
    for sel in found.selectors:
        if sel.name in known:
            names, values = known[sel.name], {}
        elif sel.name in exposition:
            names = frozenset(k for labels in exposition[sel.name] for k in labels)
            values = {k: {labels[k] for labels in exposition[sel.name] if k in labels}
                      for k in names}
        else:
            out.append(f"{sel.name}: no such series")
            continue
        labels_seen |= names
        for label, op, value in sel.matchers:
            if label in TARGET_LABELS:
                continue
            if label not in names:
                out.append(f"{sel.name}: no label {label}")
            elif label not in values or "$" in value or op in ("!=", "!~"):
                continue
            elif op == "=" and value not in values[label]:
                out.append(f'{sel.name}: no series with {label}="{value}"')
            elif op == "=~" and _LITERALS.fullmatch(value):
                out += [f'{sel.name}: no series with {label}="{v}"'
                        for v in value.split("|") if v not in values[label]]
            elif op == "=~" and not any(re.fullmatch(value, v) for v in values[label]):
                out.append(f"{sel.name}: {label}=~{value!r} matches nothing")
    out += [f"label {g} (by/on/group) is on none of the selected series"
            for g in sorted(found.grouping - labels_seen)]
    return out
