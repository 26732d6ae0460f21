"""The persistent compilation cache that conftest.py turns on for the whole session."""

import os

import jax
import jax.numpy as jnp

from omnilearn_jax.compiles import CompileCounter

_HIT = "/jax/compilation_cache/cache_hits"


def test_the_cache_is_on_outside_the_work_tree_and_inherited_by_subprocesses():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cache = os.environ["JAX_COMPILATION_CACHE_DIR"]  # conftest.py sets it for subprocesses
    assert not os.path.abspath(cache).startswith(root + os.sep)
    assert jax.config.jax_compilation_cache_dir == cache
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0
    assert jax.config.jax_persistent_cache_min_entry_size_bytes == 0


def test_the_compile_event_fires_on_a_cache_hit():
    """A program read back from the cache still counts as a compilation, so the tests that
    assert "no compile after warm-up" mean the same with the cache as without it."""
    hits = []

    def listen(event, **kwargs):
        if event == _HIT:
            hits.append(event)

    jax.monitoring.register_event_listener(listen)
    try:
        x = jnp.arange(5.0)
        counts = []
        for _ in range(2):  # two fresh closures: nothing is shared in memory, only on disk
            with CompileCounter() as compiles:
                jax.jit(lambda x: jnp.sin(x) * 7.25 - 0.5)(x).block_until_ready()
            counts.append(compiles.count)
    finally:
        jax.monitoring.unregister_event_listener(listen)
    assert counts == [1, 1]
    assert len(hits) >= 1  # the second, at least, came from the cache
