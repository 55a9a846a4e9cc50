"""One line per event on stderr, ``key=value``, so journald keeps each event whole and a
grep or ``journalctl -o cat`` can pick fields out without a JSON parser."""

from __future__ import annotations

import logging
import re
import sys
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_.:/@+\-,]+$")
_RESERVED = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def quote(value: Any) -> str:
    text = str(value).replace("\n", " ")
    if text and _BARE.match(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class KeyValueFormatter(logging.Formatter):
    """``level=info event=collected node=gpu001 verdict=pass``: the message is the event
    name, the record's ``extra`` fields follow in the order given."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {"level": record.levelname.lower(), "event": record.getMessage()}
        fields.update({k: v for k, v in vars(record).items() if k not in _RESERVED})
        line = " ".join(f"{k}={quote(v)}" for k, v in fields.items())
        if record.exc_info and record.levelno <= logging.DEBUG:
            line += " traceback=" + quote(self.formatException(record.exc_info))
        return line


def setup(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger("clusterdiag")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
    # asyncio reports a failed task or callback on its own logger; without this it would
    # reach stderr through logging's last-resort handler as a multi-line traceback.
    aio = logging.getLogger("asyncio")
    aio.handlers[:] = [handler]
    aio.propagate = False
