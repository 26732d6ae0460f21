"""The text workload: byte sequences of an offline corpus, a loss that is the mean over every
token of the global batch under any split (both backends), and perplexity in evaluation."""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from omnilearn_jax import models
from omnilearn_jax.data import datasets, text
from omnilearn_jax.engine import buckets
from omnilearn_jax.engine.mesh import Placement
from omnilearn_jax.engine.step import TrainState

B, L = 32, 8
MODEL = {"name": "transformer", "width": 16, "depth": 1, "num_heads": 2, "mlp_ratio": 2}


@pytest.fixture(scope="module")
def corpus():
    return datasets.load({"name": "text", "seq_len": L, "num_train": 256, "num_test": 32})


def test_targets_are_the_next_bytes_and_train_and_test_share_none(corpus):
    raw = text.corpus()
    assert corpus.x_train.shape == corpus.y_train.shape == (256, L)
    assert corpus.x_train.dtype == np.int32 and corpus.num_classes == 256
    assert corpus.input_shape == (L,)
    # Row i is bytes [iL, iL + L) and its targets bytes [iL + 1, iL + L + 1).
    np.testing.assert_array_equal(corpus.x_train.ravel(), raw[: 256 * L])
    np.testing.assert_array_equal(corpus.y_train[:, :-1], corpus.x_train[:, 1:])
    np.testing.assert_array_equal(corpus.y_train[:-1, -1], corpus.x_train[1:, 0])
    # The test rows are the corpus's last bytes, far from the training rows.
    np.testing.assert_array_equal(corpus.y_test[-1], raw[-L:])
    assert len(raw) > 100 * (256 + 32) * L


def test_a_local_text_file_and_too_small_a_corpus(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_bytes(bytes(range(40)))
    ds = datasets.load(
        {"name": "text", "path": str(path), "seq_len": 4, "num_train": 5, "num_test": 2}
    )
    assert ds.x_train[1].tolist() == [4, 5, 6, 7] and ds.y_train[1].tolist() == [5, 6, 7, 8]
    assert ds.x_test[-1].tolist() == [35, 36, 37, 38] and ds.y_test[-1].tolist() == [36, 37, 38, 39]
    with pytest.raises(ValueError, match="corpus has 40 bytes"):
        datasets.load(
            {"name": "text", "path": str(path), "seq_len": 4, "num_train": 8, "num_test": 2}
        )


def _reference(apply, params, x, y):
    """Single device: the mean loss over every token of the batch, and its gradient."""

    def loss(p):
        return optax.softmax_cross_entropy_with_integer_labels(apply(p, x), y).mean()

    value, grad = jax.jit(jax.value_and_grad(loss))(params)
    return float(value), grad


def test_a_planted_nan_step_on_token_ids_gives_a_nan_loss_without_a_cast(corpus):
    """`faults.nan_step` filled the int32 token ids with NaN: a NumPy 'invalid value
    encountered in cast' warning and INT_MIN ids, NaN only as a side effect of a negative
    id. Now one id past any vocabulary, whose embedding lookup is NaN."""
    import warnings

    from omnilearn_jax.engine.faults import PlantedFaults

    faults = PlantedFaults({"nan_step": 2})
    x, y = corpus.x_train[:8], corpus.y_train[:8]
    assert faults.inputs(1, x) is x
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the cast warning fails the test
        planted = faults.inputs(2, x)
    assert planted.dtype == x.dtype and (planted == np.iinfo(x.dtype).max).all()
    apply, params = models.create(MODEL, corpus.input_shape, 256, 0)
    loss = optax.softmax_cross_entropy_with_integer_labels(apply(params, planted), y).mean()
    assert np.isnan(float(loss))
    assert np.isfinite(float(_reference(apply, params, x, y)[0]))


@pytest.mark.parametrize("backend", ["shard_map", "pmap"])
def test_any_split_gives_the_single_device_token_mean(corpus, backend):
    """Uneven splits (one worker holding all, random with empty workers; padded rows hold a
    real token) give the loss and gradient of the whole batch within 1e-5. SGD with learning
    rate 1 makes the update minus the gradient, so the new parameters check the gradient."""
    apply, params = models.create(MODEL, corpus.input_shape, 256, 0)
    tx = optax.sgd(1.0)
    x, y = corpus.x_train[:B], corpus.y_train[:B]
    ref_loss, ref_grad = _reference(apply, params, x, y)
    expected = jax.tree.map(jnp.subtract, params, ref_grad)
    d = 4  # of the 8 test devices: fewer programs to load, the same arithmetic
    layout = buckets.make_layout(num_workers=d, num_devices=d, capacity=B, ratio=4.0)
    assert layout.buckets == (8, 32)
    placement = Placement(backend, jax.devices()[:d])
    steps = placement.steps(apply, tx, chunk=layout.chunk)

    def fresh_state():
        fresh = jax.tree.map(jnp.array, params)  # the step donates its state
        return placement.replicate(TrainState(jnp.zeros((), jnp.int32), fresh, tx.init(fresh)))

    steps.compile(fresh_state(), x[:1], layout.buckets, 0, example_y=y[:1])
    rng = np.random.default_rng(0)
    splits = [np.eye(d, dtype=int)[2] * B, rng.multinomial(B, rng.dirichlet(np.full(d, 0.5)))]
    assert (splits[1] == 0).any() and len(set(splits[1].tolist())) > 2
    for sizes in splits:
        new_state, metrics = steps.train(fresh_state(), placement.split(layout, sizes, x, y, 7))
        assert abs(float(metrics["loss"]) - ref_loss) < 1e-5, sizes.tolist()
        worst = max(
            float(np.max(np.abs(np.asarray(u) - np.asarray(v))))  # host: no compiles
            for u, v in zip(
                jax.tree.leaves(new_state.params), jax.tree.leaves(expected), strict=True
            )
        )
        assert worst < 1e-5, (sizes.tolist(), worst)
    assert ref_loss > 4.0  # untrained: near log 256, so the comparison is not of zeros
    assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(ref_grad)) > 1e-3


def test_a_run_reports_perplexity_of_its_final_params(tmp_path, capsys):
    """Through the trainer on the per-device layout: the eval loss is the token mean over the
    test set (recomputed here from the saved parameters) and perplexity is its exp."""
    from configs import paper_lm
    from omnilearn_jax.run.job import train_and_evaluate

    config = paper_lm.get_config("runlocal,hetero=hl8,controller=proportional")
    config.num_devices = 4  # one device a worker, of the 8 test devices
    config.bucket_ratio = 4.0  # buckets 8, 32, 48: fewer programs to compile
    config.train.num_steps = 3
    config.train.eval_every = 3
    config.train.save_params = True
    config.train.target_perplexity = 1e9  # met at the first eval: lower is better
    summary = train_and_evaluate(config, str(tmp_path))
    with open(tmp_path / "metrics.jsonl") as f:
        records = [json.loads(line) for line in f]
    last = [r for r in records if "eval_loss" in r][-1]
    assert last["eval_perplexity"] == pytest.approx(np.exp(last["eval_loss"]), rel=1e-12)
    assert summary["final_eval_perplexity"] == pytest.approx(last["eval_perplexity"])
    assert summary["time_to_target"] == pytest.approx(last["time"])
    sizes = [r["batch_sizes"] for r in records if "batch_sizes" in r]
    assert all(sum(s) == config.global_batch_size for s in sizes) and sizes[-1] != [16] * 4
    with open(tmp_path / "config.json") as f:  # what the model got, not the synthetic keys
        resolved = json.load(f)["resolved"]
    assert (resolved["num_classes"], resolved["input_shape"]) == (256, [16])
    said = capsys.readouterr()  # the closing line names perplexity (it gave accuracy only)
    assert f"done: final eval perplexity {last['eval_perplexity']:.3f}, " in said.out + said.err

    ds = datasets.load(config.dataset)
    apply, params = models.create(config.model, ds.input_shape, 256, config.seed)
    with np.load(os.path.join(tmp_path, "final_params.npz")) as saved:
        flat = dict(saved)
    leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
    key = lambda path: "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)  # noqa: E731
    trained = treedef.unflatten([flat[key(path)] for path, _ in leaves])
    logits = jax.jit(apply)(trained, ds.x_test)
    loss = float(optax.softmax_cross_entropy_with_integer_labels(logits, ds.y_test).mean())
    assert last["eval_loss"] == pytest.approx(loss, abs=1e-5)


def test_lm_configs_pass_the_checks_and_the_ablation_has_24_cells():
    from configs import ablation_lm, paper_lm
    from experiments.ablation import spec
    from omnilearn_jax.config.checks import check_config

    for arg in ("", "mode=asp,budget=8", "runlocal,hetero=hl4,controller=pi"):
        c = paper_lm.get_config(arg)
        assert (c.dataset.name, c.model.name, c.num_workers) == ("text", "transformer", 4)
        assert check_config(c) is None
    bsp, asp = paper_lm.get_config(""), paper_lm.get_config("mode=asp")
    assert (bsp.controller.b_min, bsp.controller.b_max, bsp.train.num_steps) == (8, 48, 300)
    assert (asp.mode, asp.hetero.variant, asp.controller.b_max) == ("asp", "asp", 0)
    assert asp.asp.weighting == "lr"  # adamw: a share of a step scales the step size
    for mode in ("bsp", "asp"):
        ablation = spec.from_config(ablation_lm.get_config(f"mode={mode}"))
        assert len(ablation.cells()) == 4 * 2 * 3  # controllers x levels x seeds
        spec.check_cells(ablation)
        assert "cost.curve" not in ablation.fixed_overrides()  # the formula
    # curve=PATH: every cell's clock charges the GPT's shipped curve (docs/results/lm_curve.md)
    curve = ablation_lm.get_config("mode=asp,budget=0.3,curve=data/curves/cpu_gpt_text.json")
    ablation = spec.from_config(curve)
    assert ablation.fixed_overrides()["cost.curve"] == "data/curves/cpu_gpt_text.json"
    assert curve.group == "lm_asp_curve" and "budget=0.3" in curve.base
