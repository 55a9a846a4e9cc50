"""Text from other nodes made inert for a reader: what every renderer prints of it (the
terminal, one-line, Markdown and HTML reports, and the agent's Prometheus label values).

A node report's strings (messages, components, check ids, versions, evidence) come from
an agent, a snapshot or a log line that may be hostile or broken. Printed as they are,
control characters and escape sequences act on the reader's terminal (clear the screen,
set the window title, make OSC 8 links), bidirectional overrides (U+202A-U+202E,
U+2066-U+2069, U+200E/U+200F, U+061C: Unicode's Cf category, UAX #9 table 4) reorder what
is shown, the line and paragraph separators U+2028 and U+2029 (categories Zl and Zp) end a
line for many readers (Python's ``str.splitlines`` table, docs.python.org/3/library/
stdtypes.html#str.splitlines; ECMA-262 §12.3 LineTerminator), so that what follows looks
like a line of its own, and a lone surrogate cannot even be encoded. ``shown`` writes each
such character as its Python escape (``\\x1b``, ``\\u202e``), so the reader sees what was
sent and nothing acts on it.
"""

from __future__ import annotations

import unicodedata

# Cc: C0/C1 controls and DEL; Cf: format characters (bidi overrides, zero-width joiners);
# Cs: lone surrogates; Co/Cn: private-use and unassigned code points a terminal may map;
# Zl/Zp: U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR, the only code points in them.
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def shown(text: object) -> str:
    text = str(text)
    if text.isprintable():  # the common case, at C speed
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED else ch
                   for ch in text)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"
