"""Listen addresses, tokens, the non-loopback rule and TLS settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdiag.agent.base.errors import ConfigError
from clusterdiag.agent.daemon.security import (
    Listen,
    Security,
    parse_listen,
    read_token,
    reloaded,
    security_from,
    token_matches,
)

TOKEN = "0123456789abcdef-token"


def _agent(**kw: object) -> dict[str, object]:
    base: dict[str, object] = {"listen": "127.0.0.1:9464", "token_file": None,
                               "allow_unauthenticated": False, "tls_cert": None,
                               "tls_key": None}
    base.update(kw)
    return base


@pytest.mark.parametrize(("text", "host", "port", "loopback"), [
    ("127.0.0.1:9464", "127.0.0.1", 9464, True),
    ("127.0.0.7:0", "127.0.0.7", 0, True),
    ("[::1]:9464", "::1", 9464, True),
    ("localhost:1", "localhost", 1, True),
    ("10.0.0.5:9464", "10.0.0.5", 9464, False),
    ("0.0.0.0:9464", "0.0.0.0", 9464, False),
    ("node1.example:9464", "node1.example", 9464, False),
])
def test_parse_listen(text: str, host: str, port: int, loopback: bool) -> None:
    listen = parse_listen(text)
    assert listen == Listen(host, port)
    assert listen.loopback is loopback


@pytest.mark.parametrize("text", ["9464", "127.0.0.1", "127.0.0.1:x", ":9464", "::1:9464",
                                  "1.2.3.4:70000"])
def test_bad_listen(text: str) -> None:
    with pytest.raises(ConfigError, match=r"ADDR\]?:PORT"):
        parse_listen(text)


def _token(tmp_path: Path, text: str, mode: int = 0o600) -> str:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return str(path)


def test_token_file_rules(tmp_path: Path) -> None:
    assert read_token(_token(tmp_path, TOKEN + "\n")) == TOKEN
    with pytest.raises(ConfigError, match="at least 16"):
        read_token(_token(tmp_path, "short"))
    with pytest.raises(ConfigError, match="chmod 600"):
        read_token(_token(tmp_path, TOKEN, 0o644))
    with pytest.raises(ConfigError, match="no such file"):
        read_token(str(tmp_path / "missing"))


def test_token_matches_only_exact_bearer() -> None:
    assert token_matches(f"Bearer {TOKEN}", TOKEN)
    assert token_matches(f"bearer {TOKEN}", TOKEN)
    for header in (None, "", TOKEN, f"Basic {TOKEN}", f"Bearer {TOKEN}x", f"Bearer {TOKEN[:-1]}"):
        assert not token_matches(header, TOKEN)


def test_non_loopback_needs_token_or_explicit_opt_out(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="token_file"):
        security_from(_agent(listen="10.1.2.3:9464"))
    assert security_from(_agent(listen="10.1.2.3:9464", allow_unauthenticated=True)).token is None
    sec = security_from(_agent(listen="10.1.2.3:9464", token_file=_token(tmp_path, TOKEN)))
    assert sec.token == TOKEN
    assert security_from(_agent(), "127.0.0.2:1").listen == Listen("127.0.0.2", 1)


def test_tls_settings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="both tls_cert and tls_key"):
        security_from(_agent(tls_cert="/x.crt"))
    (tmp_path / "c").write_text("not a cert")
    with pytest.raises(ConfigError, match="cannot load TLS"):
        security_from(_agent(tls_cert=str(tmp_path / "c"), tls_key=str(tmp_path / "c")))


def _running(tmp_path: Path, listen: str) -> tuple[Security, dict[str, object]]:
    """An agent started on ``listen`` with a token (an address value only: nothing binds)."""
    agent = _agent(listen=listen, token_file=_token(tmp_path, TOKEN))
    return security_from(agent), agent


def test_reload_checks_the_kept_address_not_the_new_one(tmp_path: Path) -> None:
    """Listening on 0.0.0.0 with a token, a reload to 127.0.0.1 without one must not take
    the token away: the listener stays on 0.0.0.0 until a restart."""
    current, started = _running(tmp_path, "0.0.0.0:9464")
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0:9464"):
        reloaded(current, started, _agent(listen="127.0.0.1:9464"))
    opted_out, restart = reloaded(current, started, _agent(listen="127.0.0.1:9464",
                                                           allow_unauthenticated=True))
    assert opted_out == Security(Listen("0.0.0.0", 9464), None, None)
    assert restart == ["listen 127.0.0.1:9464"]


def test_reload_changes_the_token_live_on_the_same_address(tmp_path: Path) -> None:
    current, started = _running(tmp_path, "0.0.0.0:9464")
    new_token = tmp_path / "token2"
    new_token.write_text("fedcba9876543210-rotated\n")
    new_token.chmod(0o600)
    security, restart = reloaded(current, started, {**started, "token_file": str(new_token)})
    assert security.token == "fedcba9876543210-rotated"
    assert security.listen == current.listen
    assert restart == []


def test_reload_keeps_tls_and_says_it_needs_a_restart(tmp_path: Path) -> None:
    """The SSL context is bound at start: new paths are neither loaded nor claimed live."""
    current, started = _running(tmp_path, "127.0.0.1:9464")
    tls_on = {**started, "tls_cert": str(tmp_path / "new.crt"),
              "tls_key": str(tmp_path / "new.key")}
    security, restart = reloaded(current, started, tls_on)
    assert security.tls is current.tls
    assert restart == ["tls_cert/tls_key"]


def test_reload_with_a_listen_override_needs_no_restart(tmp_path: Path) -> None:
    current = security_from(_agent(), "127.0.0.2:9464")
    _, restart = reloaded(current, _agent(), _agent(listen="127.0.0.3:1"), "127.0.0.2:9464")
    assert restart == []
