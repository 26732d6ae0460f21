"""Per-device blocks give the gradient of the homogeneous global batch, on both backends;
each device computes the smallest bucket that holds its rows; nothing recompiles."""

import os
import pickle
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from omnilearn_jax import models
from omnilearn_jax.data import datasets
from omnilearn_jax.engine import buckets, sharing
from omnilearn_jax.engine.compiles import CompileCounter
from omnilearn_jax.engine.mesh import Placement
from omnilearn_jax.engine.step import TrainState

B = 64
BACKENDS = ("shard_map", "pmap")


@pytest.fixture(scope="module")
def digits():
    return datasets.load({"name": "digits"})


def _splits(num_workers: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Uniform, one worker holding everything, and random splits with zeros."""
    out = [np.full(num_workers, B // num_workers), np.eye(num_workers, dtype=int)[1] * B]
    for _ in range(2):
        out.append(rng.multinomial(B, rng.dirichlet(np.full(num_workers, 0.3))))
    assert any((s == 0).any() for s in out[2:])
    return out


def _reference(apply, params, x, y, tx):
    """Single-device gradient and update on the concatenated valid rows."""

    def loss(p):
        return optax.softmax_cross_entropy_with_integer_labels(apply(p, x), y).mean()

    def reference(params):  # jitted: op by op, each shape and dtype compiles a program
        grad = jax.grad(loss)(params)
        updates, _ = tx.update(grad, tx.init(params), params)
        return grad, optax.apply_updates(params, updates)

    return jax.jit(reference)(params)


def _max_diff(a, b) -> float:
    """On the host: device ops here would compile a program per leaf shape and device."""
    return max(
        float(np.max(np.abs(np.asarray(u) - np.asarray(v))))
        for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )


def _steps(backend, apply, tx, layout, example, params, **kwargs):
    placement = Placement(backend, jax.devices())
    steps = placement.steps(apply, tx, chunk=layout.chunk, **kwargs)
    state = _fresh_state(placement, params, tx)
    steps.compile(state, example, layout.buckets, buckets.uniform_bucket(B, layout))
    return placement, steps


def _fresh_state(placement, params, tx):
    fresh = jax.tree.map(jnp.array, params)  # the step donates its state
    return placement.replicate(TrainState(jnp.zeros((), jnp.int32), fresh, tx.init(fresh)))


def _run_cases(digits, dtype, tol, memory_rows=0, backends=BACKENDS):
    apply, params = models.create({"name": "mlp", "hidden": 16}, digits.input_shape, 10, 0)
    params = jax.tree.map(lambda p: p.astype(dtype), params)
    x_all = digits.x_train[:B].astype(dtype)
    y_all = digits.y_train[:B]
    tx = optax.sgd(0.1, momentum=0.9)
    ref_grad, ref_params = _reference(apply, params, x_all, y_all, tx)
    # The step's loss and accuracy over the valid rows alone: a padded row (zeros in, label
    # 0 out) is argmax 0 for an untrained MLP, so counting it raised accuracy (0.08 -> 0.58).
    logits = np.asarray(jax.jit(apply)(params, x_all))
    ref_acc = float(np.mean(logits.argmax(-1) == y_all))
    ref_loss = float(optax.softmax_cross_entropy_with_integer_labels(logits, y_all).mean())
    rng = np.random.default_rng(0)
    d = len(jax.devices())
    worst = 0.0
    for backend in backends:
        for num_workers in (d, 4 * d):
            layout = buckets.make_layout(  # ratio 2: four buckets to compile, not seven
                num_workers=num_workers,
                num_devices=d,
                capacity=B,
                ratio=2.0,
                memory_rows=memory_rows,
            )
            placement, steps = _steps(backend, apply, tx, layout, x_all[:1], params)
            for sizes in _splits(num_workers, rng):
                blocks = placement.split(layout, sizes, x_all, y_all)
                grad, _ = steps.grad(placement.replicate(params), blocks)
                new_state, metrics = steps.train(_fresh_state(placement, params, tx), blocks)
                diff = max(_max_diff(grad, ref_grad), _max_diff(new_state.params, ref_params))
                assert diff <= tol, (backend, num_workers, sizes.tolist(), diff)
                assert float(metrics["accuracy"]) == pytest.approx(ref_acc, abs=1e-6)
                assert float(metrics["loss"]) == pytest.approx(ref_loss, rel=1e-5)
                worst = max(worst, diff)
    return worst


def test_uneven_gradients_match_single_device_float32(digits):
    _run_cases(digits, np.float32, 1e-5)


def test_uneven_gradients_match_single_device_float64(digits):
    """At float64 the difference is rounding alone (1e-10). One backend: the masked sums are
    the same code on both, and float32 checks both backends' reductions."""
    with jax.enable_x64(True):
        _run_cases(digits, np.float64, 1e-10, backends=("shard_map",))


def test_blocks_over_the_memory_budget_accumulate_to_the_same_gradient(digits):
    """memory_rows=16: blocks of 24 to 64 rows run as 16-row chunks (buckets become
    multiples of 16 above it), and the gradient is still that of the whole batch (the chunked
    sums are the same code on both backends)."""
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=B, memory_rows=16)
    assert layout.chunk == 16 and layout.buckets == (8, 16, 32, 48, 64)
    wide = buckets.make_layout(num_workers=8, num_devices=8, capacity=B, ratio=2.0, memory_rows=16)
    assert wide.chunk == 16 and wide.buckets == (8, 16, 32, 64)  # what _run_cases uses
    with jax.enable_x64(True):
        _run_cases(digits, np.float64, 1e-10, memory_rows=16, backends=("shard_map",))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_shared_bucket_goes_over_whole_and_steps_as_blocks_placed_one_by_one(digits, backend):
    """In one process, a split whose devices all compute one bucket is placed as one array a
    field (`Blocks.whole`), each device's block holding its own rows as a shard; the mesh
    step takes those arrays as they are (nothing compiles) and updates bit for bit as from
    the same blocks placed device by device and assembled. Padded rows (7 of 8 on half the
    devices), masks placed beforehand (as the trainer keeps them) and injected delays."""
    apply, params = models.create({"name": "mlp", "hidden": 16}, digits.input_shape, 10, 0)
    tx = optax.sgd(0.1, momentum=0.9)
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=B, ratio=2.0)
    placement, steps = _steps(backend, apply, tx, layout, digits.x_train[:1], params)
    sizes = np.array([8, 7, 8, 7, 8, 7, 8, 7])  # every device's bucket 8: shared
    x, y = digits.x_train[: sizes.sum()], digits.y_train[: sizes.sum()]
    blocks = buckets.pack(sizes, layout, placement.local_positions)
    xs, ys = zip(*(buckets.gather(x, y, b) for b in blocks), strict=True)
    xs, ys, where = list(xs), list(ys), placement.devices
    placed = [jax.device_put(b.mask[None], where[b.position]) for b in blocks]
    delays = np.arange(8, dtype=np.float32) / 8
    whole = placement.blocks(blocks, xs, ys, placed, delays, 8)
    assert whole.shared == 8 and len(whole.whole) == 4
    for b, x_b, y_b in zip(whole, xs, ys, strict=True):  # each block holds its own rows
        fields = (b.x, b.y, b.mask, b.delay)
        assert all(f.devices() == {where[b.position]} for f in fields)
        assert np.array_equal(np.asarray(b.x)[0], x_b) and np.array_equal(np.asarray(b.y)[0], y_b)
        assert np.asarray(b.mask)[0].tolist() == blocks[b.position].mask.tolist()
        assert float(np.asarray(b.delay)[0]) == delays[b.position]
    assert int(np.asarray(whole.whole[2]).sum()) == sizes.sum()  # the padding is masked
    again = placement.blocks(blocks, xs, ys, placed, delays, 8)  # the split held: its masks
    assert again.whole[2] is whole.whole[2]  # are assembled once
    fresh = [jax.device_put(m, where[b.position]) for m, b in zip(placed, blocks, strict=True)]
    assert placement.blocks(blocks, xs, ys, fresh, delays, 8).whole[2] is not whole.whole[2]
    one_by_one = placement.blocks(blocks, xs, ys, placed, None, 0)
    one_by_one.shared = 8  # the same step, its blocks placed device by device
    assert one_by_one.whole is None
    states = [_fresh_state(placement, params, tx) for _ in range(2)]
    with CompileCounter() as counter:
        a, metrics_a = steps.train(states[0], whole)
        b, metrics_b = steps.train(states[1], one_by_one)
        jax.block_until_ready((a, b))
    assert counter.count == 0
    assert _max_diff(a.params, b.params) == 0.0
    assert float(metrics_a["loss"]) == float(metrics_b["loss"])
    assert _max_diff(a.params, params) > 0  # the step moved the parameters


def test_the_data_axis_keeps_the_order_of_the_placements_devices(monkeypatch):
    """Position p on the data axis is devices[p] even where JAX would reorder a mesh's
    devices for a physical topology (planted here as a TPU slice's reordering)."""
    from jax._src import mesh_utils

    made = mesh_utils.create_device_mesh
    monkeypatch.setattr(
        mesh_utils,
        "create_device_mesh",
        lambda shape, devices=None, **kw: made(shape, devices[::-1]),
    )
    devices = jax.devices()
    for backend in BACKENDS:
        assert list(Placement(backend, devices).mesh.devices.flat) == devices


def test_decisions_run_off_the_mesh_and_without_a_cpu_backend(monkeypatch):
    """A CPU device outside the mesh takes the decisions; where JAX has no CPU backend
    (JAX_PLATFORMS=cuda on a cluster; planted) the mesh's first device does, where building
    the engine had raised "Unknown backend: 'cpu' requested"."""
    from omnilearn_jax.engine.engine import decision_device

    devices = jax.devices()
    assert decision_device(devices[:4]) == devices[-1]
    assert decision_device(devices) == devices[0]
    real = jax.local_devices

    def no_cpu(*args, backend=None, **kw):
        if backend == "cpu":
            raise RuntimeError("Unknown backend: 'cpu' requested, but no platforms are 'cpu'")
        return real(*args, backend=backend, **kw)

    monkeypatch.setattr(jax, "local_devices", no_cpu)
    assert decision_device(devices[2:6]) == devices[2]


def test_whole_fields_follow_the_mesh_rows_when_the_mesh_orders_devices_otherwise():
    """Row r of a whole array is the mesh's r-th device's block, also where the mesh orders
    the devices otherwise than the placement lists them (as a TPU mesh may): each block
    still holds its own rows, on its own device."""
    from jax.sharding import AxisType, Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    placement = Placement("shard_map", jax.devices())
    shuffled = [jax.devices()[i] for i in (0, 1, 2, 3, 6, 7, 4, 5)]  # a v3-8's mesh order
    placement.mesh = Mesh(np.asarray(shuffled), ("data",), axis_types=(AxisType.Explicit,))
    placement._data = NamedSharding(placement.mesh, P("data"))
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=B, ratio=2.0)
    blocks = buckets.pack(np.full(8, 8), layout, placement.local_positions)
    xs = [np.full((8, 2), p, np.float32) for p in range(8)]  # block p's rows hold p
    ys = [np.full(8, p, np.int32) for p in range(8)]
    order = [0, 1, 2, 3, 6, 7, 4, 5]
    whole = placement.blocks(blocks, xs, ys, [b.mask for b in blocks], None, 8)
    assert np.asarray(whole.whole[1])[:, 0].tolist() == order
    for b in whole:
        assert b.y.devices() == {placement.devices[b.position]}
        assert int(np.asarray(b.y)[0, 0]) == b.position
    # Masks placed beforehand (block p's mask holds p rows) are assembled in mesh order too.
    masks = [jax.device_put((np.arange(8) < p)[None], d) for p, d in enumerate(jax.devices())]
    whole = placement.blocks(blocks, xs, ys, masks, None, 8)
    assert np.asarray(whole.whole[2]).sum(axis=1).tolist() == order
    assert [int(np.asarray(b.mask).sum()) for b in whole] == list(range(8))


@pytest.mark.parametrize("backend", BACKENDS)
def test_padded_rows_never_touch_the_result(digits, backend):
    """Padding filled with NaN, 1e30 or -inf gives bit for bit what padding of zeros gives
    (one compiled step for every fill)."""
    apply, params = models.create(
        {"name": "cnn", "features": (4, 8), "hidden": 8}, digits.input_shape, 10, 0
    )
    sizes = np.array([0, 13, 2, 0, 29, 1, 19, 0])  # buckets 0, 16, 8, 0, 32, 8, 32, 0
    # Ratio 2: four CNN buckets to compile instead of seven; padding is what is tested.
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=B, ratio=2.0)
    assert layout.buckets == (8, 16, 32, 64)
    placement, steps = _steps(backend, apply, optax.sgd(0.1), layout, digits.x_train[:1], params)
    results = []
    for value in (0.0, np.nan, 1e30, -np.inf):
        blocks = placement.split(layout, sizes, digits.x_train[:B], digits.y_train[:B], value)
        grad, metrics = steps.grad(placement.replicate(params), blocks)
        results.append((grad, metrics))
    (g0, m0), *filled = results
    assert np.isfinite(float(m0["loss"]))
    for fill, (g1, m1) in zip(("nan", "1e30", "-inf"), filled, strict=True):
        assert _max_diff(g0, g1) == 0.0, fill
        assert float(m0["loss"]) == float(m1["loss"]), fill
        assert float(m0["accuracy"]) == float(m1["accuracy"]), fill


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_device_runs_its_smallest_bucket_and_nothing_recompiles(digits, backend):
    apply, params = models.create({"name": "mlp", "hidden": 16}, digits.input_shape, 10, 0)
    tx = optax.sgd(0.1)
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=B)
    assert layout.buckets == (8, 16, 24, 32, 40, 56, 64)
    placement, steps = _steps(backend, apply, tx, layout, digits.x_train[:1], params)
    assert len(steps.variants) == 8 * len(layout.buckets)
    assert min(p.runs for p in steps.variants.values()) == 1  # each ran once at warm-up
    state = _fresh_state(placement, params, tx)
    uniform = placement.split(layout, np.full(8, 8), digits.x_train[:B], digits.y_train[:B])
    state, _ = steps.train(state, uniform)  # warm-up: compiles the reduction and update
    rng = np.random.default_rng(1)
    splits = [rng.multinomial(B, rng.dirichlet(np.ones(8))) for _ in range(6)]
    splits += [np.eye(8, dtype=int)[7] * B, np.array([4, 4, 4, 4, 4, 4, 4, 36])]
    splits += [np.full(8, 8), np.array([7, 8, 8, 8, 8, 8, 8, 9])]  # shared bucket 8; not
    with CompileCounter() as counter:
        for sizes in splits:
            before = {key: p.runs for key, p in steps.variants.items()}
            blocks = placement.split(layout, sizes, digits.x_train[:B], digits.y_train[:B])
            state, metrics = steps.train(state, blocks)
            jax.block_until_ready(metrics)
            want = [(d, min(r for r in layout.buckets if r >= n)) for d, n in enumerate(sizes) if n]
            if blocks.shared:  # every device in the uniform share's bucket: one mesh launch
                want = []
            ran = sorted(k for k, p in steps.variants.items() if p.runs > before[k])
            assert ran == want, (sizes.tolist(), ran)
            assert all(p.runs - before[k] <= 1 for k, p in steps.variants.items())
            assert float(metrics["loss"]) > 0
    assert counter.count == 0
    assert buckets.shared_bucket(np.full(8, 8), layout) == 8
    assert buckets.shared_bucket(np.array([7, 8, 8, 8, 8, 8, 8, 9]), layout) == 0
    with CompileCounter() as sanity:  # the counter does see a compile when one happens
        jax.jit(lambda a: a * 3)(np.ones(7, np.float32)).block_until_ready()
    assert sanity.count == 1


@pytest.fixture
def private_caches(tmp_path, monkeypatch):
    """No program from JAX's persistent cache (an executable read back from it cannot be
    serialised on CPU, so sharing would fall back) and a disk folder of our own."""
    monkeypatch.setattr(sharing, "disk_path", lambda key: str(tmp_path / key))
    monkeypatch.setattr(sharing, "_memory", {})
    from jax._src import compilation_cache  # JAX memoises whether its cache is on

    monkeypatch.setattr(compilation_cache, "is_cache_used", lambda backend: False)
    return tmp_path


def _compile_and_sum(digits, share: bool):
    """(compiles, per-device sums) of the local programs of an MLP over 8 devices (a size
    no other test compiles: JAX's in-memory cache could hand back an executable that it had
    read from its persistent cache, which cannot be serialised, and sharing falls back)."""
    apply, params = models.create({"name": "mlp", "hidden": 17}, digits.input_shape, 10, 0)
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=16)
    assert layout.buckets == (8, 16)
    x, y = digits.x_train[:64], digits.y_train[:64]
    placement = Placement("shard_map", jax.devices())
    tx = optax.sgd(0.1)
    steps = placement.steps(apply, tx, chunk=16)
    steps.share = share
    state = _fresh_state(placement, params, tx)  # its small programs are not counted
    with CompileCounter() as counter:
        steps.compile(state, x[:1], layout.buckets)
    blocks = placement.split(layout, SHARE_SIZES, x, y)
    return counter.count, steps.sums(placement.replicate(params), blocks)


SHARE_SIZES = np.array([3, 8, 16, 0, 9, 5, 11, 12])


def test_a_program_loaded_on_another_device_equals_one_compiled_there(digits, private_caches):
    """Buckets are compiled once and loaded onto the other devices (sharing.py); the
    loaded programs give bit-identical sums to programs compiled on each device."""
    shared, sums = _compile_and_sum(digits, share=True)
    alone, reference = _compile_and_sum(digits, share=False)
    # One compile a bucket when shared, one a device and bucket when not; and the reduction
    # and update, once.
    assert (shared, alone) == (2 + 1, 2 * 8 + 1)
    assert _max_diff(sums, reference) == 0.0
    assert np.asarray(sums.count).tolist() == SHARE_SIZES.tolist()
    assert len(list(private_caches.iterdir())) == 2  # one verified copy a bucket on disk


def test_a_broken_copy_on_disk_is_deleted_and_compiled_afresh(digits, private_caches):
    """A copy on disk that cannot be loaded and run is deleted, the program compiled
    afresh (one compile a bucket), and the good copy written in its place."""
    _compile_and_sum(digits, share=True)
    files = sorted(private_caches.iterdir())
    good = files[0].read_bytes()
    files[0].write_bytes(good[: len(good) // 2])  # a truncated copy
    files[1].write_bytes(b"not a program")
    sharing._memory.clear()
    compiles, sums = _compile_and_sum(digits, share=True)
    assert compiles == 2 + 1
    rewritten = [pickle.loads(f.read_bytes()) for f in files]  # both whole again
    assert [len(r) for r in rewritten] == [3, 3] and len(files[0].read_bytes()) > len(good) // 2
    assert np.asarray(sums.count).tolist() == SHARE_SIZES.tolist()


def test_a_copy_that_fails_verification_is_never_used(digits, private_caches, monkeypatch):
    """A loaded copy whose bits differ from the fresh compile's: every device compiles on
    its own and nothing is written to disk."""
    monkeypatch.setattr(sharing, "_verified", lambda *a: False)
    compiles, sums = _compile_and_sum(digits, share=True)
    assert compiles == 2 * 8 + 1
    assert list(private_caches.iterdir()) == []
    assert np.asarray(sums.count).tolist() == SHARE_SIZES.tolist()


# XLA's older CPU emitters (tests/conftest.py turns the fusion emitters off to compile faster)
# round a flat vector's update and a tree's leaves differently by an ulp (3e-8): bit for bit
# is a claim about the code generator users get, so these cases run where it is on.
EMITTERS_OFF = "--xla_cpu_use_fusion_emitters=false" in os.environ.get("XLA_FLAGS", "")


@pytest.mark.skipif(EMITTERS_OFF, reason="run with the fusion emitters on, by the test below")
@pytest.mark.parametrize(
    ("backend", "tx"),
    [("shard_map", optax.adamw(0.01, weight_decay=0.1)), ("pmap", optax.sgd(0.1, momentum=0.9))],
)
def test_a_flat_state_takes_the_same_steps_as_the_tree_bit_for_bit(digits, backend, tx):
    """A state held flat (`Steps.hold`: one parameter vector, the optimiser's parameter-shaped
    state as vectors) is updated exactly as the tree is: over uneven splits (one launch a
    device), the uniform split (one mesh program) and the multi-process finish, the
    parameters and the optimiser state agree bit for bit; each program then takes one
    parameter buffer where the tree takes one a leaf."""
    from omnilearn_jax.engine.state import FlatState, params_of

    apply, params = models.create({"name": "mlp", "hidden": 16}, digits.input_shape, 10, 0)
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=B, ratio=2.0)
    x, y = digits.x_train[:B], digits.y_train[:B]
    states, runs = [], []
    for flat in (False, True):
        placement = Placement(backend, jax.devices())
        steps = placement.steps(apply, tx, chunk=layout.chunk)
        state = _fresh_state(placement, params, tx)
        if flat:
            state = placement.replicate(steps.hold(state))
            assert isinstance(state, FlatState) and isinstance(params_of(state), jax.Array)
        steps.compile(state, x[:1], layout.buckets, buckets.uniform_bucket(B, layout))
        if not flat:  # programs compiled for trees cannot take a flat state afterwards
            with pytest.raises(RuntimeError, match="first flat state must come before compiling"):
                steps.hold(state)
            assert steps.shape is None
        for sizes in ([3, 8, 16, 0, 9, 5, 11, 12], [8] * 8, [0, 0, 0, 0, 0, 0, 0, 64]):
            state, metrics = steps.train(state, placement.split(layout, np.array(sizes), x, y))
            runs.append(float(metrics["loss"]))
        blocks = placement.split(layout, np.array([1, 2, 3, 4, 5, 6, 7, 36]), x, y)
        times = np.zeros(8, np.float32)
        state = steps.finish_timed(state, steps.local(params_of(state), blocks), times, [0])[0]
        states.append(state)
    tree, flat = states
    assert len(jax.tree.leaves(params_of(flat))) == 1 < len(jax.tree.leaves(tree.params))
    assert runs[:3] == runs[3:]
    assert int(flat.step) == int(tree.step) == 4
    assert _max_diff(flat.params, tree.params) == 0.0
    assert _max_diff(flat.opt_state, tree.opt_state) == 0.0
    assert _max_diff(tree.params, params) > 0  # the steps moved the parameters


@pytest.mark.skipif(not EMITTERS_OFF, reason="the cases run in this process")
def test_the_flat_state_cases_pass_with_xlas_default_cpu_emitters():
    flags = os.environ["XLA_FLAGS"].replace("--xla_cpu_use_fusion_emitters=false", "")
    env = {**os.environ, "XLA_FLAGS": flags, "OMNILEARN_TEST_XLA_FUSION_EMITTERS": "true"}
    name = "test_a_flat_state_takes_the_same_steps_as_the_tree_bit_for_bit"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{__file__}::{name}"]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout[-3000:]


@pytest.mark.parametrize("backend", BACKENDS)
def test_finish_timed_gathers_every_devices_time_and_split_in_the_same_update(digits, backend):
    """The multi-process finish: the same update as `finish`, bit for bit, and each
    device's time, in its own slot, on every device (one collective). Where
    one device computed another split, the state comes back not updated and the error
    names process 0's split (the mesh's first device's)."""
    from omnilearn_jax.engine.step import SplitDisagreement

    apply, params = models.create({"name": "mlp", "hidden": 16}, digits.input_shape, 10, 0)
    tx = optax.sgd(0.1, momentum=0.9)
    layout = buckets.make_layout(num_workers=8, num_devices=8, capacity=B)
    placement, steps = _steps(backend, apply, tx, layout, digits.x_train[:1], params)
    sizes = np.array([3, 8, 16, 0, 9, 5, 11, 12])
    blocks = placement.split(layout, sizes, digits.x_train[:64], digits.y_train[:64])
    stacked = steps.local(placement.replicate(params), blocks)
    times = np.array([0.5, 1.25, 2.0, 0.0, 3.5, 0.125, 7.0, 9.75], np.float32)
    plain, plain_metrics = steps.finish(_fresh_state(placement, params, tx), stacked)
    fresh = _fresh_state(placement, params, tx)
    timed, metrics, every = steps.finish_timed(fresh, stacked, times, sizes)
    assert np.asarray(every).tolist() == times.tolist()
    assert _max_diff(plain.params, timed.params) == 0.0
    assert float(metrics["loss"]) == float(plain_metrics["loss"])
    assert _max_diff(plain.params, params) > 0  # the update moved the parameters

    planted = np.tile(sizes, (8, 1))
    planted[5] = [4, 8, 16, 0, 8, 5, 11, 12]  # one device computed another split
    with pytest.raises(SplitDisagreement, match=r"devices \[5\]") as caught:
        steps.finish_timed(_fresh_state(placement, params, tx), stacked, times, planted)
    assert caught.value.split.tolist() == sizes.tolist()
    assert _max_diff(caught.value.state.params, params) == 0.0  # not updated
    assert int(caught.value.state.step) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_small_sum_is_gathered_and_added_in_device_order_a_large_one_all_reduced(backend):
    """`_all_summed`, the multi-process finish's one collective: up to GATHER_BYTES it is an
    all-gather then adds in device order, so it equals numpy's sum in that order bit for bit
    (float32, values that rounding tells apart); above, it is one psum."""
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from omnilearn_jax.engine import step as step_mod

    devices = jax.devices()
    d = len(devices)
    rng = np.random.default_rng(0)
    values = rng.standard_normal((d, 257)) * 10.0 ** rng.integers(-6, 6, (d, 257))
    values = values.astype(np.float32)
    ordered = values[0].copy()
    for row in values[1:]:
        ordered = ordered + row
    assert not np.array_equal(ordered, values[::-1].sum(axis=0, dtype=np.float32))
    placement = Placement(backend, devices)

    def run(x):
        if backend == "pmap":
            fn = jax.pmap(lambda v: step_mod._all_summed(v, d), step_mod.AXIS, devices=devices)
            return np.asarray(fn(x))[0], jax.make_jaxpr(fn)(x)
        fn = jax.jit(jax.shard_map(
            lambda v: step_mod._all_summed(v[0], d), mesh=placement.mesh,
            in_specs=P(step_mod.AXIS), out_specs=P(), check_vma=False,
        ))  # fmt: skip
        x = jax.device_put(x, NamedSharding(placement.mesh, P(step_mod.AXIS)))
        return np.asarray(fn(x)), jax.make_jaxpr(fn)(x)

    small, jaxpr = run(values)
    assert "all_gather" in str(jaxpr) and "psum" not in str(jaxpr)
    np.testing.assert_array_equal(small, ordered)
    big = np.tile(values, (1, step_mod.GATHER_BYTES // (4 * 257 * d) + 1))
    summed, jaxpr = run(big)
    assert "psum" in str(jaxpr) and "all_gather" not in str(jaxpr)
    np.testing.assert_allclose(summed[:257], ordered, rtol=1e-5, atol=1e-5)


class _Result:
    """A stand-in for a device result that becomes ready after `polls` readiness checks."""

    def __init__(self, polls: int):
        self.polls, self.waited = polls, False

    def is_ready(self) -> bool:
        self.polls -= 1
        return self.polls < 0

    def block_until_ready(self):
        self.waited = True
        return self


def test_ready_times_never_sleep_once_every_result_is_ready(monkeypatch):
    """A launch that ran to completion before it returned (XLA:CPU may run it in the
    launching thread) costs no polling sleep; one that needs polls sleeps only while some
    result is pending; a single result is waited for, not polled."""
    from omnilearn_jax.engine import step

    sleeps = []
    monkeypatch.setattr(step.time, "sleep", sleeps.append)
    times = step.launch_ready_times([_Result(0), _Result(0), _Result(0)], 0.0)
    assert sleeps == [] and np.isfinite(times).all()  # the old loop slept once here
    step.launch_ready_times([_Result(0), _Result(2)], 0.0, poll=1e-4)
    assert sleeps == [1e-4, 1e-4]
    one = _Result(5)
    assert step.launch_ready_times([one], 0.0).shape == (1,) and one.waited
    assert one.polls == 5 and len(sleeps) == 2


def test_a_memory_budget_below_the_even_share_runs_over_the_mesh(tmp_path):
    """memory_rows under the even share's bucket (16 rows a device, chunks of 8): the mesh's
    shard_map program refused its chunk loop's carry (zeros that were not device-varying),
    so every such run, and every async run with memory_rows, failed at warm-up."""
    from omnilearn_jax.run.job import train_and_evaluate
    from tests.test_train import smoke_config

    finals = []
    for rows in (0, 8):
        config = smoke_config()
        config.num_workers = config.num_devices = 2
        config.global_batch_size, config.memory_rows, config.bucket_ratio = 32, rows, 8.0
        config.train.num_steps, config.train.save_params = 2, True
        train_and_evaluate(config, str(tmp_path / str(rows)))
        with np.load(tmp_path / str(rows) / "final_params.npz") as f:
            finals.append({k: f[k] for k in f.files})
    assert max(float(np.max(np.abs(finals[0][k] - finals[1][k]))) for k in finals[0]) < 1e-6
