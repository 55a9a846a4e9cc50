"""The prolog's validated copy of a YAML config, so that PyYAML is imported only when the
file changed: its import alone costs the prolog as much as starting the interpreter, and
its C loader does not help (the cost is the import, not the parse).

The copy is the document the YAML file held (``json``), stored with the SHA-256 of the
file's bytes; a copy whose hash differs from the file's is stale and rewritten. It is
validated again when read, as the YAML would be, so an upgrade that changed the schema
judges it afresh. The config names programs the root prolog runs (``prolog.scontrol``),
so the copy is trusted only where root alone could have written it: written by root, in
``DIRECTORY``, a directory owned by root with mode 0700 (none of the agent's unprivileged
user's: its StateDirectory and RuntimeDirectory are /var/lib/clusterdiag and
/run/clusterdiag, systemd/clusterdiag-agent.service), a regular file owned by root, mode
0600, one link. Anything else is refused with the reason and the YAML parsed, as is
everything when the process is not root.

The same store, under another name, keeps the prolog's record of the privileged checks it
re-ran as root (slurm/rerun_record.py): ``RootStore`` is what both are.
"""

from __future__ import annotations

import importlib
import json
import os
import stat

from ..base.safefile import open_regular_fd, read_fd

TYPE_CHECKING = False  # typing stays off the fresh-report prolog path (test_prolog_imports)
if TYPE_CHECKING:
    from typing import Any

DIRECTORY = "/var/cache/clusterdiag"
NAME = "config.json"
# A config is at most config.MAX_BYTES of YAML; its JSON form is no larger than a few
# times that.
MAX_BYTES = 4 << 20
ROOT = 0


def digest(raw: bytes) -> str:
    """The SHA-256 of ``raw``, hex. CPython's own SHA-256 module (what hashlib falls back
    to: Lib/hashlib.py ``__get_builtin_constructor``, ``_sha256`` to 3.11, ``_sha2`` from
    3.12) loads in a tenth of a millisecond, hashlib's OpenSSL binding in nearly three."""
    for name in ("_sha256", "_sha2"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        return str(module.sha256(raw).hexdigest())
    import hashlib  # a build without CPython's own module: OpenSSL's, slower to load

    return hashlib.sha256(raw).hexdigest()


def untrusted(info: os.stat_result, *, directory: bool) -> str | None:
    """Why a cache directory (``directory``) or file with this ``lstat``/``fstat`` must not
    be trusted, or None: it must be one root alone can write (and, for the file, read)."""
    kind_ok = stat.S_ISDIR(info.st_mode) if directory else stat.S_ISREG(info.st_mode)
    if not kind_ok:
        return "not a directory" if directory else "not a regular file"
    if info.st_uid != ROOT:
        return f"owned by uid {info.st_uid}, not root"
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        return f"mode {mode:04o}, not {'0700' if directory else '0600'}"
    if not directory and info.st_nlink != 1:
        return f"{info.st_nlink} hard links"
    return None


class RootStore:
    """One JSON document under a key, in the file ``name`` of ``directory``, trusted only
    where root alone could have written it; ``why`` says, for the log, why it was not used
    or not written (None when it was). ``what`` names it in those lines."""

    __slots__ = ("directory", "name", "what", "why")

    def __init__(self, directory: str | None = None, name: str = NAME,
                 what: str = "config cache") -> None:
        self.directory = DIRECTORY if directory is None else directory
        self.name, self.what = name, what
        self.why: str | None = None

    def _trusted_dir(self) -> bool:
        if os.geteuid() != ROOT:
            self.why = f"not root: the {self.what} is root's alone"
            return False
        try:
            info = os.lstat(self.directory)
        except FileNotFoundError:
            self.why = f"no {self.what} at {self.directory}"
            return False
        except OSError as exc:
            self.why = f"{self.what} {self.directory}: {exc.strerror or exc}"
            return False
        problem = untrusted(info, directory=True)
        if problem:
            self.why = f"{self.what} {self.directory} refused: {problem}"
        return problem is None

    def get(self, key: str) -> Any:
        """The document stored under ``key`` (the config's: the ``digest`` of its YAML), or
        None."""
        if not self._trusted_dir():
            return None
        path = os.path.join(self.directory, self.name)
        try:
            fd = open_regular_fd(path)
        except OSError as exc:
            self.why = f"{self.what} {path}: {exc.strerror or exc}"
            return None
        try:
            problem = untrusted(os.fstat(fd), directory=False)
            if problem:
                self.why = f"{self.what} {path} refused: {problem}"
                return None
            stored = json.loads(read_fd(fd, MAX_BYTES, path))
        except (OSError, ValueError, RecursionError) as exc:
            self.why = f"{self.what} {path} unreadable: {type(exc).__name__}"
            return None
        finally:
            os.close(fd)
        if not isinstance(stored, dict) or stored.get("key") != key:
            self.why = f"{self.what}: changed since it was kept"
            return None
        self.why = None
        return stored.get("document")

    def put(self, key: str, document: Any) -> None:
        """Store ``document`` (validated) under ``key``: written whole to a new file and
        renamed over the old, so a reader sees one or the other. A document JSON would
        change (a number as a mapping's key) is not stored."""
        try:
            text = json.dumps({"key": key, "document": document}, allow_nan=False)
        except (TypeError, ValueError):
            self.why = f"not kept in the {self.what}: not plain JSON data"
            return
        if json.loads(text)["document"] != document:
            self.why = f"not kept in the {self.what}: JSON would change it"
            return
        if os.geteuid() == ROOT:
            try:
                os.makedirs(os.path.dirname(self.directory), exist_ok=True)
                os.mkdir(self.directory, 0o700)
            except FileExistsError:
                pass
            except OSError as exc:
                self.why = f"{self.what} {self.directory}: {exc.strerror or exc}"
                return
        if not self._trusted_dir():
            return
        try:
            self._write(text)
        except OSError as exc:
            self.why = f"{self.what} {self.directory} not written: {exc.strerror or exc}"

    def _write(self, text: str) -> None:
        dir_fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        temp = f".{self.name}.{os.getpid()}"
        try:
            try:
                fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW,
                             0o600, dir_fd=dir_fd)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(text.encode("utf-8"))
                os.replace(temp, self.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except OSError:
                try:  # noqa: SIM105 - contextlib's import is off the prolog's path
                    os.unlink(temp, dir_fd=dir_fd)
                except OSError:
                    pass  # the write's error is the one to tell
                raise
            self.why = None
        finally:
            os.close(dir_fd)
