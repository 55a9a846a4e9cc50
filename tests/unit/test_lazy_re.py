"""agent/base/lazy_re.py: a pattern costs nothing until used, then answers as re's would."""

from __future__ import annotations

import re

from clusterdiag.agent.base.lazy_re import LazyPattern


def test_nothing_is_compiled_until_first_use() -> None:
    pattern = LazyPattern(r"Xid \(PCI:(?P<bdf>[0-9a-f:.]+)\): (?P<xid>\d+)", re.IGNORECASE)
    assert pattern._compiled is None
    assert pattern.pattern.startswith("Xid")
    m = pattern.search("NVRM: XID (PCI:0000:18:00): 79, pid=1")
    assert m is not None
    assert (m["bdf"], m["xid"]) == ("0000:18:00", "79")
    assert pattern._compiled is pattern.compiled  # compiled once, then kept


def _found(match: re.Match[str] | None) -> tuple[str, int] | None:
    return None if match is None else (match[0], match.start())


def test_each_method_answers_as_the_compiled_pattern() -> None:
    lazy, real = LazyPattern(r"([0-7]):(on|off)"), re.compile(r"([0-7]):(on|off)")
    text = "prio-pfc 0:off 1:off 2:on 3:off"
    assert lazy.findall(text) == real.findall(text) == [
        ("0", "off"), ("1", "off"), ("2", "on"), ("3", "off")]
    assert lazy.sub("x", text, count=1) == real.sub("x", text, count=1)
    for pos in (0, 9, 15):
        assert _found(lazy.match(text, pos)) == _found(real.match(text, pos))
        assert _found(lazy.search(text, pos, 20)) == _found(real.search(text, pos, 20))
    assert _found(lazy.match(text, 9)) == ("0:off", 9)
    assert lazy.fullmatch("3:on") is not None
    assert lazy.fullmatch("3:on ") is None
