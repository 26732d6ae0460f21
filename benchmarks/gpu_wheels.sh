#!/usr/bin/env bash
# Fetches, here, the wheels a GPU machine without registry access lacks for
# benchmarks/gpu_check.sh, into .whl/ (ignored by git; gpu_check.sh installs whatever it finds
# there). The lent H200 machines' image has JAX with CUDA, flax, optax, orbax, scikit-learn,
# PyYAML and absl-py for Python 3.12, but not ml-collections, which every config imports.
#
#   bash benchmarks/gpu_wheels.sh           # then carry .whl with the device run
#
# PYTHON: the interpreter whose pip downloads (default .venv's, else python3); TARGET_PY: the
# GPU machine's Python version (default 3.12).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}
TARGET_PY=${TARGET_PY:-3.12}
# Pure-Python wheels the image lacks, at the versions requirements.txt resolves to here.
WHEELS=(ml-collections==1.1.0)

mkdir -p .whl
EXCLUDE=$(git rev-parse --git-path info/exclude)  # .git is a file in a worktree
mkdir -p "$(dirname "$EXCLUDE")"
grep -qxF '/.whl/' "$EXCLUDE" 2>/dev/null || echo '/.whl/' >>"$EXCLUDE"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$TARGET_PY" \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
  -d .whl "${WHEELS[@]}"
ls -l .whl
