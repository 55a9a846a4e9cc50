"""aiohttp's server without its client: imported first by the modules that serve HTTP.

``import aiohttp.web`` runs the package's ``aiohttp/__init__.py`` first, and that imports
the whole client side (aiohttp 3.x ``__init__.py``: ``from .client import ...``,
``from .connector import ...``, ``from .cookiejar import ...``). ``aiohttp/connector.py``
builds two client ``SSLContext`` objects at import time, each loading the system's CA
bundle (``_SSL_CONTEXT_VERIFIED = _make_ssl_context(True)``, ``..._UNVERIFIED``, with
``set_default_verify_paths()``). The agent never makes an HTTP request, and all that
costs it about 4 MB of its resident memory (bench/agent_load.py, docs/agent.md).

So, when aiohttp is not imported yet, the ``aiohttp`` package is registered without
running its ``__init__``: ``aiohttp.web`` and the modules it imports (``web_*``,
``http_parser``, ``helpers``, ...) load as submodules of it, as they would anyway. The
one name they take from the package is ``__version__`` (``aiohttp/http.py``:
``from . import __version__`` for the Server header), read here from the first line
of that ``__init__.py``. Anything else asked of the package (``aiohttp.ClientSession``,
``from aiohttp import ClientTimeout``) runs the package's own ``__init__`` then, in place,
so a process that does need the client still gets the real package, only later.

Where that is not possible (aiohttp already imported, no ``__version__`` line, no
source), this does nothing and ``from aiohttp import web`` imports aiohttp as usual.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path

PACKAGE = "aiohttp"
# aiohttp/__init__.py's first line in every 3.x release: __version__ = "3.14.5"
_VERSION = re.compile(rb'^__version__ = "([0-9A-Za-z.+-]{1,40})"$', re.MULTILINE)


def _version(init: Path) -> str | None:
    try:
        with init.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    match = _VERSION.search(head)
    return match.group(1).decode() if match else None


def register() -> bool:
    """Register the ``aiohttp`` package without its client; False where it is left to the
    ordinary import (already imported, or its source is not as expected)."""
    if PACKAGE in sys.modules:
        return False
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None or spec.loader is None:
        return False
    version = _version(Path(spec.origin))
    if version is None:
        return False
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def complete(name: str) -> object:
        """A submodule (``from aiohttp import web`` asks for the attribute first) is
        imported as the import system would; any other name the package's ``__init__``
        defines: run it in place (its own module ``__getattr__`` replaces this one), then
        answer from it."""
        if importlib.util.find_spec(f"{PACKAGE}.{name}") is not None:
            return importlib.import_module(f"{PACKAGE}.{name}")
        del vars(package)["__getattr__"]
        loader.exec_module(package)
        return getattr(package, name)

    vars(package).update(__version__=version, __getattr__=complete)
    sys.modules[PACKAGE] = package
    return True


register()
