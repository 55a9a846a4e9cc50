"""``systemd-analyze verify`` reads the agent unit's device lines without a complaint, and
does complain about a line it cannot use (so a clean run means something): systemd logs
"Invalid device node path" / "Invalid device rights" and ignores such a line
(src/core/load-fragment.c, config_parse_device_allow), leaving the agent blind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO

UNIT = REPO / "systemd" / "clusterdiag-agent.service"


@pytest.fixture
def analyze() -> str:
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze not installed")
    return tool


def _verify(analyze: str, tmp_path: Path, text: str) -> str:
    """verify's complaints: ExecStart points at a program that exists here, since verify
    checks that too."""
    unit = tmp_path / "clusterdiag-agent.service"
    unit.write_text(text.replace("/usr/local/bin/clusterdiag", "/bin/true"))
    proc = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True,
                          check=False, timeout=60)
    return proc.stdout + proc.stderr


def test_verify_takes_every_device_line(analyze: str, tmp_path: Path) -> None:
    text = UNIT.read_text()
    assert "DeviceAllow=char-nvidia rw" in text
    assert "DeviceAllow=char-nvidia-frontend rw" in text
    complaints = _verify(analyze, tmp_path, text)
    assert "device" not in complaints.lower(), complaints


def test_verify_names_a_device_line_it_would_ignore(analyze: str, tmp_path: Path) -> None:
    text = UNIT.read_text().replace("DeviceAllow=char-nvidia rw", "DeviceAllow=nvidia rw")
    assert "Invalid device node path 'nvidia'" in _verify(analyze, tmp_path, text)
