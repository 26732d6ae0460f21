"""The persistent compilation cache that conftest.py turns on for the whole session."""

import os

import jax
import jax.numpy as jnp

from omnilearn_jax.engine.compiles import CompileCounter

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


def test_a_serialised_program_is_kept_apart_for_other_codegen_flags(monkeypatch):
    """sharing.py's copies: a program compiled at another XLA optimisation level rounds
    differently, so it gets another key; the forced CPU device count does not change code."""
    from omnilearn_jax.engine import sharing

    text, device = "module @m {}", jax.devices()[0]
    keys = {}
    for name, flags in (
        ("o0", "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=0"),
        (
            "o0, 4 devices",
            "--xla_backend_optimization_level=0 --xla_force_host_platform_device_count=4",
        ),
        ("default", "--xla_force_host_platform_device_count=8"),
    ):
        monkeypatch.setenv("XLA_FLAGS", flags)
        keys[name] = sharing.fingerprint(text, device)
    assert keys["o0"] == keys["o0, 4 devices"]
    assert keys["o0"] != keys["default"]


def test_a_serialised_program_is_keyed_by_device_kind_and_topology(monkeypatch):
    """Two hosts with other device models, or another number of processes, sharing one
    cache folder never load each other's binaries."""
    from types import SimpleNamespace

    from omnilearn_jax.engine import sharing

    real = jax.devices()[0]

    def device(kind):
        client = SimpleNamespace(platform_version=real.client.platform_version)
        return SimpleNamespace(platform=real.platform, client=client, device_kind=kind)

    text = "module @m {}"
    here = sharing.fingerprint(text, device(real.device_kind))
    assert here == sharing.fingerprint(text, real)
    assert here != sharing.fingerprint(text, device("another kind"))
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    assert here != sharing.fingerprint(text, real)
