"""Reading the shared bearer token, the one way both ends read it.

The agent checks ``Authorization: Bearer <token>`` against this file and ``cluster
gather`` sends it; if the two read the file differently (one takes the first line, the
other the whole text) a second line or a comment turns a valid token into a 401 on every
node, so both import this reader.
"""

from __future__ import annotations

import os
import stat

from .errors import ConfigError
from .safefile import open_regular_fd, read_fd

MIN_TOKEN_CHARS = 16
MAX_TOKEN_FILE_BYTES = 64 << 10


def read_token(path: str, setting: str = "agent.token_file") -> str:
    """The bearer token: the file's first non-blank line, stripped. Refuses an empty or
    short one, and a file other users may read or anyone but its owner may write, because
    either makes the token worthless. A link is followed (secrets are often mounted
    elsewhere) and its target judged; a FIFO or device is refused without blocking.
    ``setting`` names the config key in the one-line error."""
    where = f"{setting} {path}"
    try:
        fd = open_regular_fd(path, follow=True)
        try:
            info = os.fstat(fd)
            text = read_fd(fd, MAX_TOKEN_FILE_BYTES, path).decode("utf-8")
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where}: cannot read: {getattr(exc, 'strerror', None) or exc}"
                          ) from None
    if info.st_mode & stat.S_IROTH:
        raise ConfigError(f"{where}: readable by every user; chmod 600 (or 640) it")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(f"{where}: writable by group or others; chmod 600 (or 640) it")
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if len(token) < MIN_TOKEN_CHARS:
        raise ConfigError(f"{where}: the token must be at least {MIN_TOKEN_CHARS} characters")
    return token
