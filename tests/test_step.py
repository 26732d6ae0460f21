"""Uneven batches give the gradient of the homogeneous global batch, on both backends."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from omnilearn_jax import data, masking, models
from omnilearn_jax.compiles import CompileCounter
from omnilearn_jax.mesh import Placement
from omnilearn_jax.step import TrainState

B = 64


@pytest.fixture(scope="module")
def digits():
    return data.load({"name": "digits"})


def _splits(num_workers: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Uniform, one worker holding everything, and random splits with zeros."""
    out = [np.full(num_workers, B // num_workers), np.eye(num_workers, dtype=int)[1] * B]
    for _ in range(2):
        shares = rng.dirichlet(np.full(num_workers, 0.3))
        sizes = np.floor(shares * B).astype(int)
        sizes[np.argmax(sizes)] += B - sizes.sum()
        sizes[rng.integers(num_workers)] += 0  # zeros come from the sparse Dirichlet
        out.append(sizes)
    assert any((s == 0).any() for s in out[2:])
    return out


def _reference(apply, params, x, y, tx):
    """Single-device gradient and update on the concatenated valid rows."""

    def loss(p):
        return optax.softmax_cross_entropy_with_integer_labels(apply(p, x), y).mean()

    grad = jax.grad(loss)(params)
    updates, _ = tx.update(grad, tx.init(params), params)
    return grad, optax.apply_updates(params, updates)


def _max_diff(a, b) -> float:
    return max(
        float(jnp.max(jnp.abs(u - v)))
        for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _layout(kind, num_workers, devices):
    return masking.make_layout(
        kind, num_workers=num_workers, num_devices=len(devices), capacity=B, micro_batch=5
    )


def _run_cases(digits, dtype, tol):
    apply, params = models.create({"name": "mlp", "hidden": 16}, digits.input_shape, 10, 0)
    params = jax.tree.map(lambda p: p.astype(dtype), params)
    x_all = digits.x_train[:B].astype(dtype)
    y_all = digits.y_train[:B]
    tx = optax.sgd(0.1, momentum=0.9)
    ref_grad, ref_params = _reference(apply, params, x_all, y_all, tx)
    rng = np.random.default_rng(0)
    devices = jax.devices()
    worst = 0.0
    for backend in ("shard_map", "pmap"):
        placement = Placement(backend, devices)
        steps = placement.steps(apply, tx)
        for kind in ("micro", "padded"):
            for num_workers in (len(devices), 4 * len(devices)):
                layout = _layout(kind, num_workers, devices)
                for sizes in _splits(num_workers, rng):
                    packed = masking.pack_indices(sizes, layout)
                    x, y = masking.gather(x_all, y_all, packed)
                    batch = placement.batch(
                        {"x": x, "y": y, "mask": packed.mask, "trips": packed.trips}
                    )
                    grad, _ = steps.grad(placement.replicate(params), batch)
                    fresh = jax.tree.map(jnp.array, params)  # the step donates its state
                    state = placement.replicate(
                        TrainState(jnp.zeros((), jnp.int32), fresh, tx.init(fresh))
                    )
                    new_state, _ = steps.train(state, batch)
                    diff = max(_max_diff(grad, ref_grad), _max_diff(new_state.params, ref_params))
                    assert diff <= tol, (backend, kind, num_workers, sizes.tolist(), diff)
                    worst = max(worst, diff)
    return worst


def test_uneven_gradients_match_single_device_float32(digits):
    worst = _run_cases(digits, np.float32, 1e-5)
    assert worst > 0.0  # summation order differs, so float32 cannot be bit-identical


def test_uneven_gradients_match_single_device_float64(digits):
    with jax.enable_x64(True):
        _run_cases(digits, np.float64, 1e-10)


@pytest.mark.parametrize("backend", ["shard_map", "pmap"])
@pytest.mark.parametrize("fill", [np.nan, 1e30, -np.inf])
def test_padded_rows_never_touch_the_result(digits, backend, fill):
    apply, params = models.create(
        {"name": "cnn", "features": (4, 8), "hidden": 8}, digits.input_shape, 10, 0
    )
    placement = Placement(backend, jax.devices())
    steps = placement.steps(apply, optax.sgd(0.1))
    sizes = np.array([0, 13, 2, 0, 29, 1, 19, 0])
    layout = masking.make_layout("micro", num_workers=8, num_devices=8, capacity=B, micro_batch=8)
    packed = masking.pack_indices(sizes, layout)
    results = []
    for value in (0.0, fill):
        x, y = masking.gather(digits.x_train[:B], digits.y_train[:B], packed, fill=value)
        batch = placement.batch({"x": x, "y": y, "mask": packed.mask, "trips": packed.trips})
        grad, metrics = steps.grad(placement.replicate(params), batch)
        sums = steps.eval(placement.replicate(params), batch)
        results.append((grad, metrics, sums))
    (g0, m0, s0), (g1, m1, s1) = results
    assert _max_diff(g0, g1) == 0.0
    assert float(m0["loss"]) == float(m1["loss"]) and np.isfinite(float(m1["loss"]))
    assert float(m0["accuracy"]) == float(m1["accuracy"])
    assert [float(s0[k]) for k in s0] == [float(s1[k]) for k in s1]
    assert float(s1["count"]) == B


@pytest.mark.parametrize("backend", ["shard_map", "pmap"])
def test_changing_the_split_never_recompiles(digits, backend):
    apply, params = models.create({"name": "mlp", "hidden": 16}, digits.input_shape, 10, 0)
    tx = optax.sgd(0.1)
    placement = Placement(backend, jax.devices())
    steps = placement.steps(apply, tx)
    layout = masking.make_layout("micro", num_workers=8, num_devices=8, capacity=B, micro_batch=8)
    state = placement.replicate(TrainState(jnp.zeros((), jnp.int32), params, tx.init(params)))

    def run(sizes, state):
        packed = masking.pack_indices(np.asarray(sizes), layout)
        x, y = masking.gather(digits.x_train[:B], digits.y_train[:B], packed)
        batch = placement.batch({"x": x, "y": y, "mask": packed.mask, "trips": packed.trips})
        state, metrics = steps.train(state, batch)
        jax.block_until_ready(metrics)
        return state

    state = run(np.full(8, 8), state)  # warm-up: compiles once
    rng = np.random.default_rng(1)
    with CompileCounter() as counter:
        for _ in range(6):
            sizes = rng.multinomial(B, rng.dirichlet(np.ones(8)))
            state = run(sizes, state)
        state = run(np.eye(8, dtype=int)[7] * B, state)
    assert counter.count == 0
    seven = jnp.ones(7)
    with CompileCounter() as sanity:  # the counter does see a compile when one happens
        jax.jit(lambda a: a * 3)(seven).block_until_ready()
    assert sanity.count == 1
