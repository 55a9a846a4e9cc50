#!/bin/sh
# clusterdiag offline bundle: install (or upgrade) and uninstall with the node's own Python.
#   ./install.sh [install] [--prefix DIR] [--bin-dir DIR] [--config-dir DIR] [--unit-dir DIR]
#                [--slurm-dir DIR | --no-slurm] [--no-user]
#   ./install.sh uninstall
# The Python is $CLUSTERDIAG_PYTHON, else python<X.Y> (the bundle's minor version) in
# /usr/bin, /usr/local/bin or on PATH. install.py does the work and says what it did.
here=$(cd "$(dirname "$0")" && pwd) || exit 2
minor=$(sed -n 's/.*"python": *"\([0-9.]*\)".*/\1/p' "$here/bundle.json")
python=${CLUSTERDIAG_PYTHON:-}
if [ -z "$python" ]; then
    for candidate in "/usr/bin/python$minor" "/usr/local/bin/python$minor" \
            "$(command -v "python$minor" 2>/dev/null)"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ]; then python=$candidate; break; fi
    done
fi
if [ -z "$python" ]; then
    echo "clusterdiag install: ERROR no python$minor on this node: use the bundle for its" \
         "Python (python3 --version), or set CLUSTERDIAG_PYTHON" >&2
    exit 2
fi
exec "$python" -I "$here/install.py" "$@"
