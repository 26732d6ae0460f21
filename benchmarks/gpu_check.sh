#!/usr/bin/env bash
# Runs the benchmark report on a GPU machine and writes its results apart from the CPU ones:
# docs/benchmarks/gpu/*.json and docs/BENCHMARKS_GPU.md. Not part of the tests (nothing in
# tests/ needs a GPU); run it by hand where a GPU is available:
#
#   bash benchmarks/gpu_check.sh            # full sizes
#   bash benchmarks/gpu_check.sh --small    # quick check of the pipeline
#
# Uses .venv when its JAX already sees a GPU, else $PYTHON when it has a CUDA JAX and the
# project's libraries (machines without registry access); otherwise builds .venv-gpu with the
# project's requirements plus jax[cuda12] (needs the package registry). Set PYTHON to pick the
# interpreter used to create the venv.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
OUT=docs/benchmarks/gpu
DOC=docs/BENCHMARKS_GPU.md

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU visible (nvidia-smi); nothing to do" >&2
  exit 2
fi
nvidia-smi -L

sees_gpu() {  # does this interpreter's JAX have a GPU backend?
  "$1" -c 'import jax, sys; sys.exit(0 if jax.default_backend() == "gpu" else 1)' 2>/dev/null
}

has_deps() {  # can this interpreter import what the benchmarks need?
  "$1" -c 'import flax, optax, ml_collections, sklearn, orbax.checkpoint' 2>/dev/null
}

PY=""
if [ -x .venv/bin/python ] && sees_gpu .venv/bin/python; then
  PY=.venv/bin/python
elif sees_gpu "$PYTHON" && has_deps "$PYTHON"; then
  PY=$PYTHON  # a machine that ships a CUDA JAX and the libraries (no registry needed)
else
  if [ ! -x .venv-gpu/bin/python ]; then
    "$PYTHON" -m venv .venv-gpu
    .venv-gpu/bin/python -m pip install --quiet --upgrade pip
    .venv-gpu/bin/python -m pip install --quiet -r requirements.txt
  fi
  # Same jax version as requirements.txt, with the CUDA plugin and its libraries.
  JAX_VERSION=$(.venv-gpu/bin/python -c 'import jax; print(jax.__version__)')
  .venv-gpu/bin/python -m pip install --quiet "jax[cuda12]==${JAX_VERSION}"
  PY=.venv-gpu/bin/python
  sees_gpu "$PY" || { echo "gpu_check: jax[cuda12] installed but JAX sees no GPU" >&2; exit 1; }
fi

"$PY" -c 'import jax; print("jax", jax.__version__, jax.devices())'
mkdir -p "$OUT"
# JAX_PLATFORMS unset: the report then measures on the GPU (the CPU-only multi-process
# benchmark records itself as skipped there).
env -u JAX_PLATFORMS "$PY" -m benchmarks.report --out="$OUT" --doc="$DOC" "$@"
echo "gpu_check: wrote $DOC and $OUT/*.json"
