"""The GPT-like transformer: causal, tied output layer, sizes from the config, no batch
statistics (a row's logits do not depend on the other rows)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from omnilearn_jax import models

SECTION = {"name": "transformer", "width": 16, "depth": 2, "num_heads": 2, "mlp_ratio": 2}
CONTEXT, VOCAB = 12, 256


@pytest.fixture(scope="module")
def model():
    apply, params = models.create(SECTION, (CONTEXT,), VOCAB, 0)
    return jax.jit(apply), params


def test_parameter_count_follows_the_sizes_and_the_output_layer_is_tied(model):
    _, params = model
    w, d, r = SECTION["width"], SECTION["depth"], SECTION["mlp_ratio"]
    # A block: 2 LayerNorms (2w each), qkv (w x 3w + 3w), projection (w x w + w), MLP
    # (w x rw + rw, rw x w + w); plus token and position embeddings and the final LayerNorm.
    block = 4 * w + (3 * w * w + 3 * w) + (w * w + w) + (2 * r * w * w + r * w + w)
    expected = VOCAB * w + CONTEXT * w + d * block + 2 * w
    assert models.param_count(params) == expected  # a separate output layer adds VOCAB * w


def test_a_position_sees_only_earlier_tokens(model, rng):
    apply, params = model
    x = rng.integers(0, VOCAB, (3, CONTEXT)).astype(np.int32)
    changed = x.copy()
    j = 7
    changed[:, j] = (changed[:, j] + 1) % VOCAB
    a, b = np.asarray(apply(params, x)), np.asarray(apply(params, changed))
    assert a.shape == (3, CONTEXT, VOCAB)
    assert np.abs(a[:, :j] - b[:, :j]).max() == 0.0  # positions before j: exactly unchanged
    assert np.abs(a[:, j:] - b[:, j:]).max(axis=(0, 2)).min() > 1e-6  # j and after: changed


def test_a_rows_logits_do_not_depend_on_the_other_rows(model, rng):
    apply, params = model
    x = rng.integers(0, VOCAB, (4, CONTEXT)).astype(np.int32)
    alone = np.asarray(apply(params, x[:1]))
    together = np.asarray(apply(params, x))[:1]
    np.testing.assert_allclose(alone, together, rtol=0, atol=1e-6)


def test_bad_sizes_are_one_clear_error():
    with pytest.raises(ValueError, match="width 10 is not a multiple of num_heads 4"):
        models.create({**SECTION, "width": 10, "num_heads": 4}, (CONTEXT,), VOCAB, 0)
    with pytest.raises(ValueError, match=r"token inputs \[L\]"):
        models.create(SECTION, (8, 8, 1), VOCAB, 0)


def test_initial_loss_is_near_uniform_over_the_vocabulary(model, rng):
    """GPT-2's small initialisation: the untrained model predicts about uniformly."""
    apply, params = model
    x, y = rng.integers(0, VOCAB, (2, 8, CONTEXT)).astype(np.int32)
    logp = jax.nn.log_softmax(apply(params, x))
    loss = float(-jnp.mean(jnp.take_along_axis(logp, y[..., None], axis=-1)))
    assert abs(loss - np.log(VOCAB)) < 0.05  # random targets: log 256 = 5.545 nats
