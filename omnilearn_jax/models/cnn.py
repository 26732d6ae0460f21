"""A small convolutional network: 2-D for images [H, W, C], 1-D for sequences [L, C]."""

from __future__ import annotations

import jax
from flax import nnx


def group_norm(channels: int, rngs: nnx.Rngs) -> nnx.GroupNorm:
    # Per-example statistics: exact under padding and any split (see models/__init__.py).
    return nnx.GroupNorm(channels, num_groups=min(8, channels), rngs=rngs)


class CNN(nnx.Module):
    def __init__(
        self, *, input_shape, num_classes, rngs, features=(32, 64), hidden=128, norm=True, **unused
    ):
        spatial = len(input_shape) - 1
        if spatial not in (1, 2):
            raise ValueError(
                f"model cnn needs inputs [L, C] or [H, W, C]; got input shape {input_shape}"
            )
        channels = (input_shape[-1], *features)
        self.convs = nnx.List()
        self.norms = nnx.List()
        for i, (a, b) in enumerate(zip(channels[:-1], channels[1:], strict=True)):
            stride = 1 if i == 0 else 2  # downsample after the first layer
            self.convs.append(nnx.Conv(a, b, (3,) * spatial, strides=stride, rngs=rngs))
            self.norms.append(group_norm(b, rngs) if norm else None)
        self.dense = nnx.Linear(channels[-1], hidden, rngs=rngs)
        self.head = nnx.Linear(hidden, num_classes, rngs=rngs)

    def __call__(self, x):
        for conv, norm in zip(self.convs, self.norms, strict=True):
            x = conv(x)
            x = jax.nn.relu(norm(x) if norm is not None else x)
        x = x.mean(axis=tuple(range(1, x.ndim - 1)))  # global average pool
        return self.head(jax.nn.relu(self.dense(x)))
