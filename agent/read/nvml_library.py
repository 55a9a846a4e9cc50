"""Whether NVML's library can be loaded, asked without importing pynvml.

pynvml's ``nvmlInit`` first loads ``libnvidia-ml.so.1`` with ``ctypes.CDLL`` and raises
``NVMLError_LibraryNotFound`` when that fails. Importing pynvml costs about four
interpreter starts (a few thousand lines of ctypes structures), so the prolog (which with
a fresh agent report needs NVML only for ``gpu.processes``) and the NVML collector first
make the same ``dlopen`` themselves (through ``_ctypes``, the loader ctypes.CDLL calls,
without importing ctypes' structures): when it fails, the NVML source says
``LibraryNotFound`` as pynvml would have, without the import or the worker. When it
succeeds pynvml is imported as always, and its own ``CDLL`` finds the library loaded.
"""

from __future__ import annotations

import errno
import os

# What pynvml's _LoadNvmlLibrary loads on Linux, the name ``error_name`` gives its
# failure, and its message (tests/unit/test_nvml_library.py reads them from pynvml).
LIBRARY = "libnvidia-ml.so.1"
NOT_FOUND = "LibraryNotFound"
NOT_FOUND_MESSAGE = "NVML Shared Library Not Found"


def missing() -> bool:
    """True when NVML's library is not there: the dlopen pynvml makes fails with "No such
    file or directory". Any other failure (out of descriptors, of memory) is our trouble,
    not a missing driver, so it is left to the collection, which names it."""
    try:
        import _ctypes  # ctypes' own loader: ctypes itself adds ~3 ms to a ~60 ms prolog

        _ctypes.dlopen(LIBRARY, os.RTLD_LOCAL)  # as ctypes.CDLL asks (it adds RTLD_NOW)
    except ImportError:  # _ctypes' own file could not be opened (out of descriptors)
        return False
    except OSError as exc:
        return os.strerror(errno.ENOENT) in str(exc)
    return False
