#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04 by
# default; 24.04 works too). NumPy goes into a virtual environment, $AUTOGRADER_ROOT/venv
# (/autograder/venv), which run_autograder uses: Ubuntu 23.04 and later refuse `pip install`
# into the system Python (PEP 668), and a venv also keeps the grader apart from system packages.
# AUTOGRADER_ROOT and AUTOGRADER_VENV change the place, for a local dry run.
set -euo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
VENV="${AUTOGRADER_VENV:-$ROOT/venv}"
if ! python3 -c "import ensurepip, venv" 2>/dev/null; then
    # Ubuntu ships venv's pip bootstrap in a package of its own
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv
fi
if ! python3 -c "import sys; sys.exit(sys.version_info < (3, 10))"; then
    echo "error: the grader needs Python >= 3.10, this image has $(python3 --version 2>&1):" \
         "choose the Ubuntu 22.04 (or later) base image in Gradescope's autograder settings" >&2
    exit 1
fi
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --disable-pip-version-check "numpy>=1.24"
"$VENV/bin/python" -c "import numpy; print('numpy', numpy.__version__, 'in $VENV')"
