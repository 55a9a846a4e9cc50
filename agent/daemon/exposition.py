"""The Prometheus text format the agent serves on ``/metrics``, written here.

prometheus_client's package imports its HTTP servers, urllib.request and the email
modules they need (``prometheus_client/exposition.py``): about 1 MB of the agent's
resident memory for what is, for gauges and counters, a few lines of formatting
(docs/agent.md, Memory). The text is the one ``prometheus_client.generate_latest``
(0.26) writes for the same families, byte for byte (tests/unit/test_exposition.py
compares them): format 0.0.4, https://prometheus.io/docs/instrumenting/exposition_formats/
("Text format details"): ``# HELP`` with backslash and line feed escaped, ``# TYPE``, then
one line per sample, label values with backslash, double quote and line feed escaped.

A ``Family`` has the attributes ``generate_latest`` reads of a metric family (``name``,
``type``, ``documentation``, ``samples`` of ``name``, ``labels``, ``value``,
``timestamp``), so tools and tests that use prometheus_client can still render or parse
what the agent builds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import NamedTuple

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
GAUGE = "gauge"
COUNTER = "counter"


class Sample(NamedTuple):
    """One series' value; ``timestamp`` is always None (the scrape's time is used)."""

    name: str
    labels: dict[str, str]
    value: float
    timestamp: float | None = None


class Family:
    """One metric family: its name, help, type and the samples added to it. A counter's
    samples are named ``<name>_total`` (the text format's convention)."""

    __slots__ = ("documentation", "labels", "name", "samples", "type")

    def __init__(self, name: str, documentation: str, kind: str,
                 labels: Sequence[str] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.type = kind
        self.labels = list(labels)
        self.samples: list[Sample] = []

    def add_metric(self, values: Sequence[str], value: float) -> None:
        """A series with ``values`` for this family's label names, in their order."""
        name = f"{self.name}_total" if self.type == COUNTER else self.name
        self.samples.append(Sample(name, dict(zip(self.labels, values, strict=True)),
                                   value))


def _number(value: float) -> str:
    """A value as Go prints it (prometheus_client.utils.floatToGoString): ``+Inf``,
    ``-Inf``, ``NaN``, else Python's shortest repr of the float, with an exponent where Go
    would switch to one sooner than Python (seven or more digits before the point)."""
    number = float(value)
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if math.isnan(number):
        return "NaN"
    text = repr(number)
    dot = text.find(".")
    if number > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


def _label_value(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _line(sample: Sample) -> str:
    value = _number(sample.value)
    if not sample.labels:
        return f"{sample.name} {value}\n"
    labels = ",".join(f'{name}="{_label_value(text)}"'
                      for name, text in sorted(sample.labels.items()))
    return f"{sample.name}{{{labels}}} {value}\n"


def text(families: Iterable[Family]) -> bytes:
    """The families in the text format, UTF-8."""
    out: list[str] = []
    for family in families:
        name = f"{family.name}_total" if family.type == COUNTER else family.name
        doc = family.documentation.replace("\\", r"\\").replace("\n", r"\n")
        out.append(f"# HELP {name} {doc}\n# TYPE {name} {family.type}\n")
        out.extend(_line(sample) for sample in family.samples)
    return "".join(out).encode()
