"""Data sets, the global-batch sampler, models' per-example normalisation, optimisers."""

import collections
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from omnilearn_jax import models
from omnilearn_jax.data import datasets
from omnilearn_jax.engine import optim
from omnilearn_jax.models.resnet import ResNet18


def test_the_global_batch_depends_on_seed_and_step_only():
    a = datasets.GlobalBatchSampler(1000, 64, seed=3)
    b = datasets.GlobalBatchSampler(1000, 64, seed=3)
    steps = [40, 0, 17, 15, 16, 31]  # any order, across epochs (15 steps an epoch)
    for t in steps:
        assert np.array_equal(a.indices(t), b.indices(t))
    assert len(set(a.indices(0)) | set(a.indices(1))) == 128  # no repeats within an epoch
    assert not np.array_equal(a.indices(0), datasets.GlobalBatchSampler(1000, 64, 4).indices(0))
    assert not np.array_equal(a.indices(0), a.indices(15))  # a fresh permutation each epoch
    assert np.array_equal(
        a.stream(64 * 14 + 10, 100), np.concatenate([a.indices(14), a.indices(15)])[10:110]
    )
    assert a.is_epoch_end(14) and not a.is_epoch_end(15)


def test_mnist1d_is_generated_locally_cached_and_leaves_numpy_seeded(tmp_path):
    np.random.seed(123)
    expected = np.random.rand()
    np.random.seed(123)
    ds = datasets.load({"name": "mnist1d", "data_dir": str(tmp_path)})
    assert np.random.rand() == expected  # the generator's reseeding did not leak out
    assert ds.x_train.shape == (4000, 40, 1) and ds.x_test.shape == (1000, 40, 1)
    assert ds.num_classes == 10 and (tmp_path / "mnist1d.npz").exists()
    again = datasets.load({"name": "mnist1d", "data_dir": str(tmp_path)})  # from the cache
    assert np.array_equal(ds.x_train, again.x_train)


def test_synthetic_and_digits_shapes_and_labels():
    ds = datasets.load(
        {
            "name": "synthetic",
            "input_shape": (4, 6, 2),
            "num_classes": 7,
            "num_train": 100,
            "num_test": 20,
        }
    )
    assert ds.x_train.shape == (100, 4, 6, 2) and ds.y_test.shape == (20,)
    assert ds.num_classes == 7 and set(np.unique(ds.y_train)) <= set(range(7))
    digits = datasets.load({"name": "digits"})
    assert digits.input_shape == (8, 8, 1) and len(digits.y_train) + len(digits.y_test) == 1797
    assert digits.x_train.min() >= 0.0 and digits.x_train.max() <= 1.0


def test_digits_read_from_the_shipped_file_equal_scikit_learns_loader():
    """The loader reads scikit-learn's CSV itself (no SciPy import); the arrays are exactly
    `load_digits`'s, and the loaded split holds the pixel values / 16."""
    from sklearn.datasets import load_digits

    images, labels = datasets.digits_arrays()
    bunch = load_digits()
    np.testing.assert_array_equal(images, bunch.images)
    np.testing.assert_array_equal(labels, bunch.target)
    assert images.shape == (1797, 8, 8) and images.max() == 16.0
    ds = datasets.load({"name": "digits"})
    both = np.concatenate([ds.x_train, ds.x_test])[..., 0]
    assert sorted(map(bytes, (both * 16).astype(np.uint8))) == sorted(
        map(bytes, bunch.images.astype(np.uint8))
    )


def test_npz_round_trip(tmp_path):
    """Bytes come back as the pixel values / 255 in float32 (0 -> 0, 255 -> 1, exactly);
    labels and shapes unchanged; float inputs are taken as they are."""
    path = tmp_path / "mine.npz"
    pixels = np.arange(10 * 4 * 4 * 3).reshape(10, 4, 4, 3) % 256  # every byte value
    pixels = pixels.astype(np.uint8)
    labels = np.arange(10) % 3
    np.savez(path, x_train=pixels, y_train=labels, x_test=pixels[:2], y_test=np.array([0, 2]))
    ds = datasets.load({"name": "npz", "path": str(path)})
    assert ds.x_train.dtype == np.float32 and ds.y_train.dtype == np.int32
    np.testing.assert_array_equal(ds.x_train, (pixels / 255.0).astype(np.float32))
    np.testing.assert_array_equal(ds.x_test, ds.x_train[:2])
    assert ds.x_train[0, 0, 0, 0] == 0.0 and ds.x_train.max() == 1.0
    np.testing.assert_array_equal(ds.y_train, labels)
    np.testing.assert_array_equal(ds.y_test, [0, 2])
    assert ds.num_classes == 3 and ds.input_shape == (4, 4, 3)
    floats = np.linspace(-2.0, 3.0, 10 * 5).reshape(10, 5)
    np.savez(path, x_train=floats, y_train=labels, x_test=floats[:2], y_test=np.array([0, 2]))
    np.testing.assert_array_equal(
        datasets.load({"name": "npz", "path": str(path)}).x_train, floats.astype(np.float32)
    )


@pytest.mark.parametrize("name,shape", [("cnn", (40, 1)), ("cnn", (8, 8, 1)), ("mlp", (8, 8, 1))])
def test_each_example_is_normalised_on_its_own(name, shape):
    """GroupNorm: an example's logits do not depend on the other rows of the batch, so
    padded rows cannot leak into valid ones and every split computes the same thing."""
    apply, params = models.create({"name": name}, shape, 10, seed=0)
    apply = jax.jit(apply)  # one compile: both calls below have the same shape
    x = jax.random.normal(jax.random.key(1), (5, *shape))
    alone = apply(params, x.at[2:].set(0.0))[:2]  # the other rows are zero padding
    with_others = apply(params, x.at[2:].multiply(1e3))[:2]
    assert float(jnp.max(jnp.abs(alone - with_others))) <= 1e-5
    assert alone.shape == (2, 10)


def test_every_resnet_convolution_is_followed_by_a_group_norm_and_none_by_batch_norm():
    """ResNet-18 normalises like the CNN checked above (GroupNorm after each of its 20
    convolutions, no batch statistics); its structure is read without computing anything,
    since compiling ResNet-18 alone would cost more than the rest of this file."""
    model = nnx.eval_shape(
        lambda: ResNet18(input_shape=(8, 8, 3), num_classes=10, rngs=nnx.Rngs(0), width=4)
    )
    kinds = collections.Counter(
        type(node).__name__ for _, node in nnx.iter_graph(model) if isinstance(node, nnx.Module)
    )
    assert kinds["Conv"] == kinds["GroupNorm"] == 20 and kinds["BasicBlock"] == 8
    assert not any("BatchNorm" in name for name in kinds), kinds


def test_optimizers_and_schedules_follow_the_config():
    section = {
        "name": "sgd",
        "learning_rate": 0.1,
        "schedule": "warmup_cosine",
        "warmup_steps": 10,
        "momentum": 0.9,
    }
    lr = optim.learning_rate(section, num_steps=110)
    assert float(lr(0)) == 0.0 and float(lr(10)) == pytest.approx(0.1)
    assert float(lr(110)) == pytest.approx(0.0, abs=1e-7)
    params = {"w": jnp.ones(3)}
    grad = {"w": jnp.full(3, 2.0)}
    for name, expected in (("sgd", 1 - 0.1 * 2.0), ("adamw", 1 - 0.1 * (1 + 0.01))):
        tx = optim.create(
            {
                "name": name,
                "learning_rate": 0.1,
                "schedule": "constant",
                "weight_decay": 0.01 if name == "adamw" else 0.0,
            },
            10,
        )
        updates, _ = tx.update(grad, tx.init(params), params)
        new = optax.apply_updates(params, updates)
        assert float(new["w"][0]) == pytest.approx(expected, rel=1e-5)


def test_a_models_initialiser_is_traced_once_a_process_for_each_seed(monkeypatch):
    """models.create keeps each model's jitted initialiser (0.1-0.3 s of tracing a run
    otherwise) and its graph's apply: the same seed is traced once and gives the same
    parameters, in new buffers; another seed is traced again but shares apply; arguments of
    another type, another class or arguments that are not config data get their own."""
    from omnilearn_jax.engine.memo import Kept

    built = []

    def counted(**kwargs):
        built.append(kwargs["rngs"])
        return mlp(**kwargs)

    mlp = models._MODELS["mlp"]
    monkeypatch.setitem(models._MODELS, "mlp", counted)
    monkeypatch.setitem(models._MODELS, "mlp2", mlp)
    monkeypatch.setattr(models, "_INITIALISERS", Kept(16))
    monkeypatch.setattr(models, "_APPLY", Kept(16))
    section = {"name": "mlp", "hidden": 16, "unused": 1}  # MLP takes **unused
    apply, first = models.create(section, (64,), 10, 0)
    again_apply, again = models.create(section, (64,), 10, 0)
    assert len(built) == 1 and again_apply is apply
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(again), strict=True):
        assert np.array_equal(a, b) and a.unsafe_buffer_pointer() != b.unsafe_buffer_pointer()
    other_apply, other = models.create(section, (64,), 10, 1)
    assert len(built) == 2 and other_apply is apply
    pairs = zip(jax.tree.leaves(first), jax.tree.leaves(other), strict=True)
    assert not all(np.array_equal(a, b) for a, b in pairs)
    assert models.create({**section, "unused": 1.0}, (64,), 10, 0)[0] is not apply
    assert models.create({**section, "unused": True}, (64,), 10, 0)[0] is not apply
    assert len(built) == 4
    assert models.create({**section, "name": "mlp2"}, (64,), 10, 0)[0] is not apply
    for _ in range(2):  # not config data: built anew each time
        models.create({**section, "unused": object()}, (64,), 10, 0)
    assert len(built) == 6


def test_kept_values_go_oldest_first_and_plain_keys_tell_types_apart():
    from omnilearn_jax.engine.memo import Kept, plain_key

    kept, builds = Kept(2), []
    for key in ("a", "b", "a", "c", "a", None, None):
        kept.get(key, lambda key=key: builds.append(key) or key)
    assert builds == ["a", "b", "c", "a", None, None] and list(kept.values) == ["c", "a"]
    keys = {plain_key(v) for v in (1, 1.0, True, "1", None, (1,), {"a": 1})}
    assert len(keys) == 7 and None not in keys
    assert plain_key({"b": 1, "a": (2, 3)}) == plain_key({"a": [2, 3], "b": 1})
    assert plain_key(1, object()) is None


def test_npz_scales_each_split_of_bytes_by_its_own_dtype(tmp_path):
    """Byte images are scaled to [0, 1] split by split: decided by x_train alone, a float test
    split beside byte training images was divided by 255 again, and a byte test split beside
    float training images kept 0-255."""
    rows = {"y_train": np.arange(4) % 2, "y_test": np.arange(2)}  # two classes
    for x_train, x_test in (
        (np.full((4, 3), 255, np.uint8), np.full((2, 3), 1.0, np.float32)),
        (np.full((4, 3), 1.0, np.float32), np.full((2, 3), 255, np.uint8)),
    ):
        np.savez(tmp_path / "d.npz", x_train=x_train, x_test=x_test, **rows)
        ds = datasets.load({"name": "npz", "path": str(tmp_path / "d.npz")})
        assert ds.x_train.max() == ds.x_test.max() == 1.0


def test_npz_bytes_are_scaled_in_float32_with_the_float64_bits(tmp_path):
    """Through float64 a uint8 file peaked at 3.25x the memory its data takes (2.3 GiB for
    CIFAR's 50,000 images); every byte value still gives the float64 division's float32."""
    import tracemalloc

    every = np.arange(256, dtype=np.uint8)
    assert np.array_equal(
        np.divide(every, np.float32(255), dtype=np.float32), (every / 255.0).astype(np.float32)
    )
    x = np.zeros((2000, 32, 32, 3), np.uint8)
    x[:, 0, 0, 0] = np.arange(2000) % 256
    y = np.arange(2000, dtype=np.int64) % 2  # two classes
    path = tmp_path / "d.npz"
    np.savez(path, x_train=x, y_train=y, x_test=x[:500], y_test=y[:500])
    tracemalloc.start()
    ds = datasets.load({"name": "npz", "path": str(path)})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    kept = ds.x_train.nbytes + ds.x_test.nbytes
    assert peak <= 1.4 * kept, peak / kept  # 3.25x through float64, 1.25x now
    assert np.array_equal(
        ds.x_train[:, 0, 0, 0], ((np.arange(2000) % 256) / 255.0).astype(np.float32)
    )


@pytest.mark.parametrize("stray,warned", [(9, False), (255, True)])
def test_npz_labels_far_past_the_classes_that_appear_are_warned_of(tmp_path, capsys, stray, warned):
    """num_classes is the largest label + 1: one stray 255 among ten classes gave the model
    256 outputs without a word."""
    y = np.arange(100) % 9
    y[5] = stray
    path = tmp_path / "d.npz"
    np.savez(path, x_train=np.ones((100, 4)), y_train=y, x_test=np.ones((9, 4)), y_test=y[:9])
    assert datasets.load({"name": "npz", "path": str(path)}).num_classes == stray + 1
    said = capsys.readouterr().err
    assert ("labels run to 255 but only 10 distinct values appear" in said) is warned, said


@pytest.mark.parametrize(
    "key, value, says",
    [("momentum", 1.5, "in [0, 1)"), ("momentum", -0.5, "in [0, 1)"),
     ("weight_decay", -1.0, ">= 0"), ("warmup_steps", -5, ">= 0"), ("b2", 1.0, "in [0, 1)")],
)  # fmt: skip
def test_optimizer_values_out_of_range_are_refused(key, value, says):
    """Each trained to the end, status complete (momentum 1.5 diverges)."""
    section = {"name": "sgd", "learning_rate": 0.1, "momentum": 0.9, key: value}
    with pytest.raises(ValueError, match=rf"optimizer.{key} must be {re.escape(says)}, got"):
        optim.check(section)
    optim.check({**section, key: 0})  # the edge each range keeps
