"""A small decoder-only transformer (GPT-2-like): token and position embeddings, pre-LayerNorm
blocks of causal self-attention and an MLP, a final LayerNorm, and an output layer tied to
the token embedding.

Inputs are token ids [n, L] (any dtype; cast to int32) and the logits are [n, L, vocab]:
position i predicts token i + 1. LayerNorm normalises each token on its own and attention
never looks across examples, so no statistic depends on the other rows of a batch and the
result is the same under any split. There is no dropout: `apply(params, x)` takes no random
key, and dropout that is exact under any split would need a key per example.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

_INIT_STD = 0.02  # GPT-2's initial weight scale


def _dense(cin: int, cout: int, rngs: nnx.Rngs, std: float = _INIT_STD) -> nnx.Linear:
    return nnx.Linear(cin, cout, kernel_init=nnx.initializers.normal(std), rngs=rngs)


class Block(nnx.Module):
    """x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, width: int, num_heads: int, mlp_ratio: int, depth: int, rngs: nnx.Rngs):
        if width % num_heads:
            raise ValueError(f"model width {width} is not a multiple of num_heads {num_heads}")
        self.num_heads = num_heads
        # Residual projections start smaller, as in GPT-2, so depth does not grow the output.
        residual_std = _INIT_STD / math.sqrt(2 * depth)
        self.norm1 = nnx.LayerNorm(width, rngs=rngs)
        self.qkv = _dense(width, 3 * width, rngs)
        self.proj = _dense(width, width, rngs, residual_std)
        self.norm2 = nnx.LayerNorm(width, rngs=rngs)
        self.up = _dense(width, mlp_ratio * width, rngs)
        self.down = _dense(mlp_ratio * width, width, rngs, residual_std)

    def __call__(self, x):
        n, length, width = x.shape
        heads = self.qkv(self.norm1(x)).reshape(n, length, 3, self.num_heads, -1)
        q, k, v = heads[:, :, 0], heads[:, :, 1], heads[:, :, 2]  # [n, L, heads, head_dim]
        attended = jax.nn.dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.reshape(n, length, width))
        return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))


class Transformer(nnx.Module):
    """`input_shape` is (context,), `num_classes` the vocabulary; `width` the model width,
    `depth` the number of blocks, `num_heads` and `mlp_ratio` as in GPT-2."""

    def __init__(
        self,
        *,
        input_shape,
        num_classes,
        rngs,
        width=64,
        depth=2,
        num_heads=4,
        mlp_ratio=4,
        **unused,
    ):
        if len(input_shape) != 1:
            raise ValueError(f"model transformer needs token inputs [L]; got {input_shape}")
        if min(width, depth, num_heads, mlp_ratio) < 1:
            raise ValueError(
                f"model transformer needs positive width, depth, num_heads and mlp_ratio; got "
                f"{width}, {depth}, {num_heads}, {mlp_ratio}"
            )
        self.embed = nnx.Embed(
            num_classes, width, embedding_init=nnx.initializers.normal(_INIT_STD), rngs=rngs
        )
        init = nnx.initializers.normal(_INIT_STD)
        self.position = nnx.Param(init(rngs.params(), (input_shape[0], width)))
        self.blocks = nnx.List(
            [Block(width, num_heads, mlp_ratio, depth, rngs) for _ in range(depth)]
        )
        self.norm = nnx.LayerNorm(width, rngs=rngs)

    def __call__(self, x):
        tokens = x.astype(jnp.int32)
        h = self.embed(tokens) + self.position[: tokens.shape[1]]
        for block in self.blocks:
            h = block(h)
        return self.embed.attend(self.norm(h))  # tied output layer
