#!/usr/bin/env bash
# Runs the benchmarks that mean something on one GPU and writes their results apart from the
# CPU ones: docs/benchmarks/gpu/*.json and docs/BENCHMARKS_GPU.md, and, where the variable OUT
# names a folder (a device run's), a copy of both as OUT/gpu_results.tgz. Not part of the tests
# (nothing in tests/ needs a GPU); run it by hand where a GPU is available:
#
#   bash benchmarks/gpu_check.sh              # the one-GPU subset below, full sizes
#   bash benchmarks/gpu_check.sh --small      # quick check of the pipeline (runs/gpu_check_small)
#   bash benchmarks/gpu_check.sh --only=step  # any benchmarks.report arguments
#
# The default subset (GPU_BENCHMARKS): the block step against a plain jitted step, the
# compile count across split changes, the trainer loop against a plain Flax/optax loop, the
# controller decision's cost and the controller-only simulation. The others need several
# devices or CPU processes (hetero_wall, multiprocess*, collective_cost, step_overhead) or
# take longer than a lent machine's minutes.
#
# Interpreter: .venv's when its JAX sees a GPU; else $PYTHON (default python3) when its JAX
# sees one, after installing any wheels in .whl/ into a private folder (machines without
# registry access: fetch them here first with benchmarks/gpu_wheels.sh and carry .whl);
# otherwise builds .venv-gpu with the project's requirements plus jax[cuda12] (needs the
# package registry). GPU_CHECK_ON_CPU=1 runs the same steps on CPU (a dry run of this script).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
RESULTS=docs/benchmarks/gpu
DOC=docs/BENCHMARKS_GPU.md
GPU_BENCHMARKS=${GPU_BENCHMARKS:-step,compiles,end_to_end,controller_cost,controller_sim}
WANT=gpu
if [ "${GPU_CHECK_ON_CPU:-0}" = 1 ]; then
  WANT=cpu
  RESULTS=runs/gpu_check_dry  # a dry run's CPU numbers stay out of the committed GPU ones
  DOC=$RESULTS/BENCHMARKS_GPU.md
elif ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "gpu_check: no NVIDIA GPU visible (nvidia-smi); nothing to do" >&2
  exit 2
else
  nvidia-smi -L
fi

sees() {  # does this interpreter's JAX run on the backend we want?
  "$1" -c "import jax, sys; sys.exit(0 if jax.default_backend() == '$WANT' else 1)" 2>/dev/null
}

has_deps() {  # can this interpreter import what the benchmarks need?
  "$1" -c 'import flax, optax, ml_collections, sklearn, orbax.checkpoint, yaml' 2>/dev/null
}

if compgen -G ".whl/*.whl" >/dev/null; then  # carried wheels, installed privately
  SITE=${TMPDIR:-/tmp}/omnilearn_site
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi

PY=""
if [ -x .venv/bin/python ] && sees .venv/bin/python && has_deps .venv/bin/python; then
  PY=.venv/bin/python
elif sees "$PYTHON" && has_deps "$PYTHON"; then
  PY=$PYTHON  # a machine that ships a CUDA JAX and the libraries (no registry needed)
elif [ "$WANT" = gpu ]; then
  if [ ! -x .venv-gpu/bin/python ]; then
    "$PYTHON" -m venv .venv-gpu
    .venv-gpu/bin/python -m pip install --quiet --upgrade pip
    .venv-gpu/bin/python -m pip install --quiet -r requirements.txt
  fi
  # Same jax version as requirements.txt, with the CUDA plugin and its libraries.
  JAX_VERSION=$(.venv-gpu/bin/python -c 'import jax; print(jax.__version__)')
  .venv-gpu/bin/python -m pip install --quiet "jax[cuda12]==${JAX_VERSION}"
  PY=.venv-gpu/bin/python
  sees "$PY" || { echo "gpu_check: jax[cuda12] installed but JAX sees no GPU" >&2; exit 1; }
else
  echo "gpu_check: no interpreter here runs the benchmarks on $WANT" >&2
  exit 1
fi

"$PY" -c 'import jax; print("jax", jax.__version__, jax.devices())'
# A JAX the tests never ran on is measured all the same, but said so (requirements.txt's
# range; engine/sharing.py then compiles each device's programs on its own).
"$PY" -c 'import jax, sys
from omnilearn_jax.engine.sharing import TESTED_JAX
if not jax.__version__.startswith(TESTED_JAX):
    tested = " ".join(v + "*" for v in TESTED_JAX)
    print("gpu_check: jax", jax.__version__, "is not a version the tests ran on (" + tested
          + "); measuring it anyway", file=sys.stderr)'
for arg in "$@"; do  # a GPU pipeline check keeps its numbers out of the committed ones
  if [ "$arg" = --small ] && [ "$WANT" = gpu ]; then
    RESULTS=runs/gpu_check_small
    DOC=$RESULTS/BENCHMARKS_GPU.md
  fi
done
mkdir -p "$RESULTS"
ONLY=(--only="$GPU_BENCHMARKS")
for arg in "$@"; do [[ $arg == --only=* ]] && ONLY=(); done
# On a GPU, JAX_PLATFORMS unset: the report then measures there.
PLATFORM=()
[ "$WANT" = cpu ] && PLATFORM=(JAX_PLATFORMS=cpu)
status=0
# ${A[@]+"${A[@]}"}: an empty array under `set -u` (bash before 4.4 calls it unbound).
env -u JAX_PLATFORMS ${PLATFORM[@]+"${PLATFORM[@]}"} "$PY" -m benchmarks.report --out="$RESULTS" \
  --doc="$DOC" ${ONLY[@]+"${ONLY[@]}"} "$@" || status=$?
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then  # a device run: what comes back
  tar czf "$OUT/gpu_results.tgz" "$RESULTS" "$DOC"
  echo "gpu_check: packed $OUT/gpu_results.tgz"
fi
echo "gpu_check: wrote $DOC and $RESULTS/*.json (report exit $status)"
exit "$status"
