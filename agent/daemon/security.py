"""Who may talk to the agent, and over what (threat model: prometheus.io/docs/operating/security).

Secure by default: loopback unless configured; a non-loopback address needs a bearer
token file unless the config opts out explicitly; the token is compared in constant time;
TLS when a certificate and key are given. Every mistake here is a one-line start error
(exit 2) that says how to fix it, because a daemon that silently exposes GPU inventory and
a clear endpoint to the network is worse than one that does not start.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..base.errors import ConfigError
from ..base.tokenfile import read_token

if TYPE_CHECKING:
    import ssl


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
    import ssl  # OpenSSL only where TLS is configured (daemon/openssl.py)

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"agent: cannot load TLS certificate {cert} / key {key}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None
    return context


# The paths a site may leave without the token (agent.unauthenticated_paths); /healthz is
# always open: it says only "ok" or "starting".
OPENABLE_PATHS = frozenset({"/healthz", "/metrics"})


@dataclass(frozen=True)
class Security:
    listen: Listen
    token: str | None
    tls: ssl.SSLContext | None
    open_paths: frozenset[str] = frozenset()


def open_paths(agent: dict[str, Any]) -> frozenset[str]:
    """``agent.unauthenticated_paths``: what a site leaves open to a scraper without the
    token. Only the read-only scrape and health paths may be; anything else (the report,
    the snapshot, the clear) names an inventory or a state change and keeps the token."""
    paths = agent.get("unauthenticated_paths") or []
    wrong = [p for p in paths if p not in OPENABLE_PATHS]
    if wrong:
        raise ConfigError(f"agent.unauthenticated_paths: {str(wrong[0])[:80]!r} cannot be "
                          f"left without the token (only {', '.join(sorted(OPENABLE_PATHS))})")
    return frozenset(str(p) for p in paths)


def security_from(agent: dict[str, Any], listen_text: str | None = None) -> Security:
    """Check the ``agent:`` settings and load what they name; ConfigError says the fix."""
    listen = parse_listen(listen_text or agent["listen"])
    token = read_token(agent["token_file"]) if agent.get("token_file") else None
    if not listen.loopback and token is None and not agent.get("allow_unauthenticated"):
        raise ConfigError(
            f"agent: refusing to listen on {listen} without a token: set agent.token_file "
            "(a file holding a secret), or listen on 127.0.0.1, or set "
            "agent.allow_unauthenticated: true")
    return Security(listen, token, tls_context(agent.get("tls_cert"), agent.get("tls_key")),
                    open_paths(agent))


def reloaded(current: Security, old_agent: dict[str, Any], new_agent: dict[str, Any],
             listen_text: str | None = None) -> tuple[Security, list[str]]:
    """What a SIGHUP may switch to live, and the settings that need a restart.

    Only the token changes live: the listener and its TLS context were bound at start. So
    the new settings are checked against the address actually kept, not the one the file
    now names: a reload that drops the token while the agent still listens on 0.0.0.0 is
    refused (ConfigError) instead of opening that address to everyone."""
    wanted = parse_listen(listen_text or new_agent["listen"])
    restart = []
    if wanted != current.listen:
        restart.append(f"listen {wanted}")
    if any(old_agent.get(k) != new_agent.get(k) for k in ("tls_cert", "tls_key")):
        restart.append("tls_cert/tls_key")
    if open_paths(new_agent) != current.open_paths:
        restart.append("unauthenticated_paths")
    checked = security_from({**new_agent, "tls_cert": None, "tls_key": None},
                            str(current.listen))
    return Security(current.listen, checked.token, current.tls, current.open_paths), restart
