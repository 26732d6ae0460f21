"""Test set-up: 8 fake CPU devices, no GPU, no network, W&B off, a persistent compile cache,
XLA's backend optimisation at level 0 (compiling is most of a cold run).

The environment is set before JAX is imported, so the test process and every subprocess it
starts (main.py, the launcher, ablation cells) read the same settings.

JAX's persistent compilation cache lives outside the work tree, in the user's cache directory
(`$XDG_CACHE_HOME` or `~/.cache`, then `omnilearn_jax/jax_cache`; `OMNILEARN_TEST_JAX_CACHE`
names another). Every trainer builds fresh `jax.jit` closures, so the same programs are
compiled again by each test and each subprocess; with the cache, XLA's work is done once and
read back afterwards (minimum compile time 0 s, minimum entry size 0 bytes: every program is
cached). The cache changes no number. The compile-count assertions keep their power: JAX
reports a backend compile event for a cache hit as for a miss (checked in
`test_the_compile_event_fires_on_a_cache_hit`). Delete the directory for a cold run.
"""

import os
import sys

import numpy as np
import pytest
from hypothesis import settings

# Property tests draw the same examples every run (a failure reproduces); the falsifying
# example is printed with the failure.
settings.register_profile("omnilearn", derandomize=True, database=None, print_blob=True)
settings.load_profile("omnilearn")


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.environ.get("OMNILEARN_TEST_JAX_CACHE") or os.path.join(
        base, "omnilearn_jax", "jax_cache"
    )


os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
# Two XLA flags make compiling cheaper in tests, each unless XLA_FLAGS already sets it or its
# environment variable gives another value; subprocesses inherit them (they drop only the
# device-count flag).
# - The backend (LLVM) optimises compiled CPU code at level 0: compiling is most of a cold test
#   run's CPU and takes about half as long at level 0 (test_text.py: 61 CPU-s cold at the
#   default level, 35 at 0), while the programs, and so every asserted number, are the same
#   maths (OMNILEARN_TEST_XLA_OPT).
# - The CPU fusion emitters (XLA's newer code generator for fused loops) are off: the older
#   emitters compile the same fusions in about a third of the time (a cold
#   tests/test_text.py::test_a_run_reports_perplexity_of_its_final_params: 14.9 s of backend
#   compiling with them, 4.7 s without; 24.8 s against 12.1 s in all, 2026-12-03), and every
#   test compares programs compiled alike (OMNILEARN_TEST_XLA_FUSION_EMITTERS=true keeps them).
TEST_XLA_FLAGS = (
    ("--xla_backend_optimization_level", "OMNILEARN_TEST_XLA_OPT", "0"),
    ("--xla_cpu_use_fusion_emitters", "OMNILEARN_TEST_XLA_FUSION_EMITTERS", "false"),
)
for _flag, _variable, _default in TEST_XLA_FLAGS:
    if _flag not in os.environ["XLA_FLAGS"]:
        os.environ["XLA_FLAGS"] += f" {_flag}={os.environ.get(_variable, _default)}"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("WANDB_MODE", "disabled")
JAX_CACHE = os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", _cache_dir())
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
os.makedirs(JAX_CACHE, exist_ok=True)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def rng(request):
    """A seeded NumPy generator; the seed is printed with a failing test's report.

    The seed is fixed (so a failure reproduces) unless OMNILEARN_TEST_SEED sets another.
    """
    seed = int(os.environ.get("OMNILEARN_TEST_SEED", "20251201"))
    request.node.user_properties.append(("seed", seed))
    print(f"random seed: {seed} (set OMNILEARN_TEST_SEED to change)")
    return np.random.default_rng(seed)


# `make test` runs the files on two workers (pytest-xdist, `--dist loadfile`: a file's tests,
# and so its module fixtures, stay on one worker), handing out one file at a time in
# collection order. The files that take longest go first, so that neither worker is left
# with a long file at the end (measured CPU seconds, most first; the rest keep their order).
LONGEST_FIRST = (
    "test_step.py",
    "test_async_remote.py",
    "test_multiprocess.py",
    "test_paper_pipeline.py",
    "test_resume.py",
    "test_async.py",
    "test_text.py",
    "test_ablate.py",
    "test_user_errors.py",
    "test_controllers_policies.py",
    "test_train.py",
    "test_async_semantics.py",
    "test_interrupt.py",
    "test_ablate_multihost.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        name = os.path.basename(str(item.path))
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: a file's tests keep their order
