"""An agent that serves no TLS loads no OpenSSL.

The agent stays resident on every node, so its memory is paid fleet-wide. Python's ``ssl``
maps libssl and libcrypto into the process, and hashlib's OpenSSL binding (``_hashlib``)
libcrypto; asyncio and aiohttp import them at their own import, whether or not a connection
is ever encrypted: about 4.6 MiB of the agent's resident memory on this project's machines
(bench/agent_load.py prints the agent's RSS). CPython and aiohttp are written to run on a
Python built without OpenSSL: hashlib then uses CPython's own hash modules (Lib/hashlib.py:
``except ImportError: _hashlib = None``, ``__get_builtin_constructor``), hmac its own HMAC
and ``_operator``'s compare_digest (Lib/hmac.py), asyncio and http.client leave TLS out
(``except ImportError: ssl = None``), and aiohttp's server takes ``SSLContext`` as absent
(aiohttp/web.py, web_runner.py, web_protocol.py: ``except ImportError``).

So, before the daemon imports anything that would load them, an agent whose config sets
neither ``agent.tls_cert`` nor ``agent.tls_key`` enters both names in ``sys.modules`` as
None: "if the value is None, then a ModuleNotFoundError is raised" (the Python Language
Reference, The import system, The module cache). TLS is read at start only (a change of
either setting asks for a restart: daemon/security.py ``reloaded``), so an agent with TLS
loads OpenSSL from its start as before. A config that cannot be read blocks nothing: the
daemon's start reads it again and says what is wrong with it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from ..base.errors import ClusterdiagError
from ..run import session

if TYPE_CHECKING:
    from pathlib import Path

OPENSSL = ("ssl", "_hashlib")


def keep_out_unless_tls(config_path: Path | None) -> bool:
    """Block OpenSSL's modules where the config at ``config_path`` serves no TLS and
    neither is loaded yet; whether they are blocked now."""
    if any(name in sys.modules for name in OPENSSL):
        return False
    try:
        agent = session.load(config_path).section("agent")
    except ClusterdiagError:
        return False
    if agent.get("tls_cert") or agent.get("tls_key"):
        return False
    for name in OPENSSL:
        sys.modules[name] = None  # type: ignore[assignment]
    return True
