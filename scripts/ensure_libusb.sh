#!/bin/sh
# open3d needs the system library libusb-1.0-0. Install it with apt when we can, else say what to install.
PY=${1:-.venv/bin/python}
"$PY" -c "import open3d" 2>/dev/null && exit 0
if command -v apt-get >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else SUDO="none"; fi
    if [ "$SUDO" != none ]; then
        echo "open3d needs libusb-1.0-0; installing it with apt-get"
        $SUDO apt-get install -y -q libusb-1.0-0 >/dev/null 2>&1 || \
            { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q libusb-1.0-0 >/dev/null 2>&1; }
    fi
fi
if ! "$PY" -c "import open3d" 2>/dev/null; then
    echo "error: open3d cannot be imported; install the system library libusb-1.0-0 (Debian/Ubuntu: apt-get install libusb-1.0-0) and rerun" >&2
    exit 1
fi
