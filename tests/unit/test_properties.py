"""Property-based tests for the parsers and loaders that read what we do not control.

The property everywhere: bad input gives a value or a clear reason (a finding, a
ConfigError, a SerdeError), never an unhandled exception, and good data next to the bad
survives.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterdiag import checks
from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.collectors.host import parse_cpu_list, split_cmdline
from clusterdiag.agent.collectors.kernel_log import parse_lines
from clusterdiag.agent.model import Snapshot
from clusterdiag.agent.model.serde import SerdeError
from clusterdiag.agent.read.sysfs import parse_int, read_int, read_text
from clusterdiag.agent.settings.config import load_config

CATALOG = {spec.id: spec.schema for spec in checks.REGISTRY.values()}
XID_LINE = "NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, name=python3, GPU has fallen off the bus."
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])

T = TypeVar("T")


def _outcome(func: Callable[[], T], expected: type[Exception]) -> tuple[T | None, Exception | None]:
    """The result, or the expected exception; anything else propagates and fails the test."""
    try:
        return func(), None
    except expected as exc:
        return None, exc


# Values sysfs files hold when something is wrong: empty, huge, negative, binary, no newline.
sysfs_bytes = st.one_of(
    st.binary(max_size=64),
    st.integers(min_value=-(1 << 70), max_value=1 << 70).map(lambda n: str(n).encode()),
    st.sampled_from([b"", b"\n", b"4: ACTIVE\n", b"400 Gb/sec (4X NDR)", b"0x1f\n", b"\xff\xfe",
                     b"18446744073709551615\n", b"-1\n", b"N/A\n", b"1_000\n"]),
)


@SETTINGS
@given(data=sysfs_bytes)
def test_sysfs_reads_give_a_value_or_a_reason(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "value"
    path.write_bytes(data)
    text, reason = read_text(path)
    assert text is not None
    assert reason is None
    number, why = read_int(path)
    assert (number is None) != (why is None)
    if number is not None:
        assert "_" not in text
        assert number == int(text.split()[0], 0)
        assert -(1 << 63) <= number < 1 << 64
    else:
        assert why is not None
        assert why.startswith("garbage") or why == "missing"


@SETTINGS
@given(text=st.text(max_size=60))
def test_parse_int_never_raises(text: str) -> None:
    number, why = parse_int(text)
    assert (number is None) != (why is None)


@SETTINGS
@given(text=st.one_of(st.text(max_size=80), st.sampled_from(["²", "0-²", "1٣", "0-3,²"])))
def test_host_text_parsers_never_raise(text: str) -> None:
    count = parse_cpu_list(text)
    assert count is None or count >= 0
    try:
        words = split_cmdline(text)
    except ValueError:  # documented: an unbalanced quote, which the collector reports
        assert text.count('"') % 2 == 1
        return
    assert all(isinstance(word, str) for word in words)


log_line = st.one_of(
    st.text(max_size=120),
    st.sampled_from([
        XID_LINE,
        "[12345.678901] " + XID_LINE,
        "4,1234,5678901,-;" + XID_LINE,
        "Jan  5 10:00:00 node kernel: " + XID_LINE,
        "2026-01-05T10:00:00.123456+00:00 node kernel: " + XID_LINE,
        "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress",
        "NVRM: Xid (PCI:0000:1b:00): ",
        "NVRM: Xid (PCI:", "NVRM: Xid (PCI:zzzz): x, pid=, name=",
    ]),
    st.binary(max_size=80).map(lambda b: b.decode("utf-8", errors="replace")),
)


@SETTINGS
@given(lines=st.lists(log_line, max_size=20), cut=st.integers(min_value=0, max_value=200))
def test_kernel_log_lines_never_raise_and_keep_good_events(lines: list[str], cut: int) -> None:
    """Any junk around a good XID line, including a truncated copy of it, leaves the good
    line's event in the result with its code and address."""
    mixed = [*lines, XID_LINE[:cut], XID_LINE, *lines]
    log = parse_lines(mixed, now=1_800_000_000.0)
    good = [e for e in log.xids if e.raw == XID_LINE]
    assert good
    assert good[-1].xid == 79
    assert good[-1].pci_bdf == "0000:1b:00.0"
    for event in log.xids:
        assert isinstance(event.xid, int)


yaml_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                         st.text(max_size=12))
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12,
)
config_keys = st.sampled_from(["profile", "level", "budget_s", "checks", "prolog", "agent",
                               "epilog", "node_name", "bogus", "prolg"])
config_docs = st.dictionaries(config_keys, yaml_values, max_size=5)


@SETTINGS
@given(doc=config_docs)
def test_config_loads_or_says_why_in_one_line(tmp_path: Path, doc: dict[str, object]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc))
    config, error = _outcome(lambda: load_config(path, CATALOG), ConfigError)
    if error is not None:
        assert str(error).startswith(f"config {path}")
        assert "\n" not in str(error)
        return
    assert config.data["level"] in ("quick", "full")
    assert isinstance(config.data["checks"], dict)


@SETTINGS
@given(text=st.text(max_size=200))
def test_any_config_text_loads_or_fails_in_one_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    _, error = _outcome(lambda: load_config(path, CATALOG), ConfigError)
    assert error is None or "\n" not in str(error)


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=20)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=20,
)


@SETTINGS
@given(data=st.one_of(json_values, st.fixed_dictionaries(
    {"node": st.text(max_size=10), "taken_at": st.floats(allow_nan=False)},
    optional={"nvml": json_values, "host": json_values, "infiniband": json_values,
              "pci": json_values, "sources": json_values})))
def test_snapshot_from_foreign_json_is_a_snapshot_or_a_serde_error(data: object) -> None:
    snap, error = _outcome(lambda: Snapshot.from_dict(json.loads(json.dumps(data))), SerdeError)
    if error is not None:
        assert str(error)
        return
    assert Snapshot.from_dict(snap.to_dict()) == snap
