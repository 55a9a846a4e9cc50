"""OpenSSL's modules kept out of an agent that serves no TLS (agent/daemon/openssl.py), each
case in a fresh interpreter: only there is neither module loaded yet."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Asks for the block, then imports what the agent imports and uses what needs a hash or a
# compare: prints whether it blocked, whether ssl imports, and a SHA-256 and an HMAC.
_PROBE = """
import json, sys
from pathlib import Path
from clusterdiag.agent.daemon import openssl
blocked = openssl.keep_out_unless_tls(Path(sys.argv[1]) if sys.argv[1] else None)
import asyncio, hashlib, hmac, secrets
from clusterdiag.agent.daemon import server_only
server_only.register()
from aiohttp import web
try:
    import ssl
    tls = True
except ImportError:
    tls = False
print(json.dumps({"blocked": blocked, "ssl": tls,
                  "sha256": hashlib.sha256(b"clusterdiag").hexdigest(),
                  "hmac": hmac.new(b"k", b"m", "sha256").hexdigest(),
                  "same": hmac.compare_digest(b"token", b"token")}))
"""


def _probe(config: Path | None) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(config or "")],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def _expected() -> dict[str, object]:
    import hashlib
    import hmac

    return {"sha256": hashlib.sha256(b"clusterdiag").hexdigest(),
            "hmac": hmac.new(b"k", b"m", "sha256").hexdigest(), "same": True}


def test_without_tls_ssl_cannot_load_and_hashes_still_agree(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("agent: {listen: 127.0.0.1:9464}\n")
    got = _probe(config)
    assert (got["blocked"], got["ssl"]) == (True, False)
    assert {k: got[k] for k in ("sha256", "hmac", "same")} == _expected()
    assert _probe(None)["blocked"] is True  # no config file: the defaults, no TLS


@pytest.mark.parametrize("text", [
    "agent: {tls_cert: /etc/c.pem, tls_key: /etc/k.pem}\n",
    "agent: {tls_cert: /etc/c.pem}\n",  # half of it: the start says what is missing
    "agent: {interval_s: soon}\n",  # unreadable: the start says what is wrong
])
def test_with_tls_or_a_config_in_doubt_nothing_is_kept_out(tmp_path: Path, text: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    got = _probe(config)
    assert (got["blocked"], got["ssl"]) == (False, True)
    assert {k: got[k] for k in ("sha256", "hmac", "same")} == _expected()
