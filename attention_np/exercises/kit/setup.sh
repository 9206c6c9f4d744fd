#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder's image (Ubuntu with python3).
set -e
if ! command -v pip3 >/dev/null; then
    apt-get update && apt-get install -y python3 python3-pip
fi
python3 -m pip install --no-cache-dir "numpy>=1.24"
