"""A saved snapshot holding a number no collector writes is refused whole, naming where.

``1e400`` (infinity once parsed), ``-1e400``, NaN, an integer of 10,000 digits (more than
Python parses), an integer beyond 64 bits (which turned into a float overflowed in the
report's telemetry) and a negative counter are each a UsageError (exit 2) of one line that
names the file and the JSON path; a snapshot of garbage names its first few paths and how
many there are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterdiag.agent.base.errors import UsageError
from clusterdiag.agent.run.snapshot_file import load_snapshot
from clusterdiag.agent.run.snapshot_values import SHOWN
from tests.conftest import REPO

REAL_H200 = REPO / "tests/fixtures/real/h200-vm-580.159.04.snapshot.json"
ECC = "$.nvml.gpus[0].ecc_volatile_corrected"


def _with_counter(tmp_path: Path, number: str) -> Path:
    """The real H200 snapshot with GPU 0's volatile ECC count spelled ``number``."""
    data = json.loads(REAL_H200.read_text())
    data["nvml"]["gpus"][0]["ecc_volatile_corrected"] = "@"
    path = tmp_path / "odd.json"
    path.write_text(json.dumps(data).replace('"@"', number))
    return path


def _refusal(path: Path) -> str:
    with pytest.raises(UsageError) as caught:
        load_snapshot(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"--from-snapshot {path}: ")
    return message


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", "9" * 10_000,
                                    str(1 << 64), str(-(1 << 63) - 1), "-1"])
def test_an_out_of_range_number_is_named_by_its_path(tmp_path: Path, number: str) -> None:
    message = _refusal(_with_counter(tmp_path, number))
    assert f"a value out of range: {ECC} (" in message
    assert len(message) < 400


def _every_int(value: Any, to: int) -> Any:
    if isinstance(value, dict):
        return {k: _every_int(v, to) for k, v in value.items()}
    if isinstance(value, list):
        return [_every_int(v, to) for v in value]
    return to if type(value) is int else value


def test_a_snapshot_of_negative_counters_names_the_first_few(tmp_path: Path) -> None:
    data = _every_int(json.loads(REAL_H200.read_text()), -1)
    path = tmp_path / "garbage.json"
    path.write_text(json.dumps(data))
    message = _refusal(path)
    assert " values out of range: $.sources." in message
    assert message.count("(-1, a negative count)") == SHOWN
