"""Reading the shared bearer token, the one way both ends read it.

The agent checks ``Authorization: Bearer <token>`` against this file and ``cluster
gather`` sends it; if the two read the file differently (one takes the first line, the
other the whole text) a second line or a comment turns a valid token into a 401 on every
node, so both import this reader.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..agent.errors import ConfigError

MIN_TOKEN_CHARS = 16


def read_token(path: str, setting: str = "agent.token_file") -> str:
    """The bearer token: the file's first non-blank line, stripped. Refuses an empty or
    short one and a file other users may read, because either makes the token worthless.
    ``setting`` names the config key in the one-line error."""
    where = f"{setting} {path}"
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
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{where}: the token must be at least {MIN_TOKEN_CHARS} characters")
    return token
