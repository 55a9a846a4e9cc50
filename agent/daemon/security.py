"""Who may talk to the agent, and over what (slurm-systemd-security.md §5).

Secure by default: loopback unless configured; a non-loopback address needs a bearer
token file unless the config opts out explicitly; the token is compared in constant time;
TLS when a certificate and key are given. Every mistake here is a one-line start error
(exit 2) that says how to fix it, because a daemon that silently exposes GPU inventory and
a clear endpoint to the network is worse than one that does not start.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import ssl
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class Listen:
    host: str
    port: int

    @property
    def loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to anything

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_listen(text: str) -> Listen:
    """``ADDR:PORT`` or ``[V6ADDR]:PORT``."""
    where = f"listen address {text!r}"
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{where}: expected ADDR:PORT, e.g. 127.0.0.1:9464")
    if ":" in host and not text.startswith("["):
        raise ConfigError(f"{where}: write an IPv6 address as [ADDR]:PORT")
    return Listen(host, int(port))


def read_token(path: str) -> str:
    """The bearer token: the file's first line. Refuses an empty one and a file other
    users may read, because either would make the token worthless."""
    where = f"agent.token_file {path}"
    try:
        info = os.stat(path)
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                          ) from None
    if info.st_mode & stat.S_IROTH:
        raise ConfigError(f"{where}: readable by every user; chmod 600 (or 640) it")
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(token) < 16:
        raise ConfigError(f"{where}: the token must be at least 16 characters")
    return token


def token_matches(header: str | None, token: str) -> bool:
    """``Authorization: Bearer <token>``, compared in constant time."""
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    try:
        offered = given.strip().encode()
    except UnicodeEncodeError:  # header bytes that are not UTF-8 (kept as surrogates)
        return False
    return hmac.compare_digest(offered, token.encode())


def tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if not cert and not key:
        return None
    if not cert or not key:
        raise ConfigError("agent: TLS needs both tls_cert and tls_key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"agent: cannot load TLS certificate {cert} / key {key}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    return context


@dataclass(frozen=True)
class Security:
    listen: Listen
    token: str | None
    tls: ssl.SSLContext | None


def security_from(agent: dict[str, Any], listen_text: str | None = None) -> Security:
    """Check the ``agent:`` settings and load what they name; ConfigError says the fix."""
    listen = parse_listen(listen_text or agent["listen"])
    token = read_token(agent["token_file"]) if agent.get("token_file") else None
    if not listen.loopback and token is None and not agent.get("allow_unauthenticated"):
        raise ConfigError(
            f"agent: refusing to listen on {listen} without a token: set agent.token_file "
            "(a file holding a secret), or listen on 127.0.0.1, or set "
            "agent.allow_unauthenticated: true")
    return Security(listen, token, tls_context(agent.get("tls_cert"), agent.get("tls_key")))
