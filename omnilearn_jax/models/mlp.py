"""A multi-layer perceptron over flattened inputs."""

from __future__ import annotations

import math

import jax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, *, input_shape, num_classes, rngs, hidden=128, depth=1, **unused):
        sizes = (math.prod(input_shape),) + (hidden,) * depth
        self.layers = nnx.List(
            [nnx.Linear(a, b, rngs=rngs) for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
        )
        self.head = nnx.Linear(sizes[-1], num_classes, rngs=rngs)

    def __call__(self, x):
        x = x.reshape(x.shape[0], -1)
        for layer in self.layers:
            x = jax.nn.relu(layer(x))
        return self.head(x)
