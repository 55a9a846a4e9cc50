"""Whether NVML's library can be loaded, asked without importing pynvml.

pynvml's ``nvmlInit`` first loads ``libnvidia-ml.so.1`` with ``ctypes.CDLL`` and raises
``NVMLError_LibraryNotFound`` when that fails. Importing pynvml costs about four
interpreter starts (a few thousand lines of ctypes structures), so the prolog, which on a
node with a fresh agent report only needs NVML for ``gpu.processes``, first makes the
same ``dlopen`` itself: when it fails, the NVML source would say ``LibraryNotFound`` and
every check needing it would skip, and the prolog says so without the import. When it
succeeds pynvml is imported as always, and its own ``CDLL`` finds the library loaded.
"""

from __future__ import annotations

# What pynvml's _LoadNvmlLibrary loads on Linux (tests/unit/test_nvml_library.py reads it
# there) and the name ``error_name`` gives its failure.
LIBRARY = "libnvidia-ml.so.1"
NOT_FOUND = "LibraryNotFound"


def missing() -> bool:
    """True when loading NVML's library fails as pynvml's would."""
    import ctypes

    try:
        ctypes.CDLL(LIBRARY)
    except OSError:
        return True
    return False
