"""The train state, as a tree or held flat.

`TrainState` holds the parameters and the optimiser state as the model's trees. `FlatState`
holds the same state as one parameter vector and the optimiser state with every
parameter-shaped subtree a vector (flat.py): a BSP step then passes one parameter buffer to
each program where the tree passes one a leaf, and on CPU a program's host cost grows with
its buffers (the reduction and update of the CNN's 25 state buffers took 0.43-0.59 ms, of
one vector 0.16-0.25 ms; docs/trainer.md). Inside a program the vectors are unflattened and
the trees updated (step.py), so the numbers are the tree's bit for bit. `FlatState.params`
and `.opt_state` give the trees (traced, or eagerly), so code that reads a state's
parameters works on both.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax

from omnilearn_jax.engine.memo import Kept


class TrainState(NamedTuple):
    step: jax.Array
    params: Any
    opt_state: Any


class StateShape:
    """What a `FlatState` needs to give back its trees: the packer (flat.Flat) and the tree
    optimiser state's shapes. Compared by identity (it is a compiled program's static
    argument): one for every state of this structure in a process (`StateShape.of`), so
    that a later run's programs are the earlier run's (jax.jit caches by it)."""

    def __init__(self, pack, opt_like):
        self.pack, self.opt_like = pack, opt_like

    @classmethod
    def of(cls, state: TrainState, pack) -> StateShape:
        """The shape of `state` held flat by `pack` (flat.Flat): the same object again for a
        state of the same tree structure, leaf shapes and optimiser state."""
        like = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), state.opt_state)
        key = (
            type(pack), pack.treedef, tuple(pack.shapes), jax.tree.structure(like),
            tuple(jax.tree.leaves(like)),
        )  # fmt: skip
        return _SHAPES.get(key, lambda: cls(pack, like))


_SHAPES = Kept(8)


@jax.tree_util.register_pytree_node_class
class FlatState:
    """A `TrainState` held flat: `vector` the parameters, `opt` the optimiser state with its
    parameter-shaped subtrees as vectors; `shape` (static) how to unflatten them."""

    def __init__(self, step, vector, opt, shape: StateShape):
        self.step, self.vector, self.opt, self.shape = step, vector, opt, shape

    def tree_flatten(self):
        return (self.step, self.vector, self.opt), self.shape

    @classmethod
    def tree_unflatten(cls, shape, children):
        return cls(*children, shape)

    @property
    def params(self):
        return self.shape.pack.tree(self.vector)

    @property
    def opt_state(self):
        return self.shape.pack.trees(self.shape.opt_like, self.opt)

    def plain(self) -> TrainState:
        """The same state as a `TrainState` of trees."""
        return TrainState(self.step, self.params, self.opt_state)


def flatten(state: TrainState, shape: StateShape) -> FlatState:
    """`state` held flat as `shape` says."""
    pack = shape.pack
    return FlatState(state.step, pack.vector(state.params), pack.vectors(state.opt_state), shape)


def plain(state) -> TrainState:
    """`state` as a `TrainState` of trees (itself if it is one)."""
    return state.plain() if isinstance(state, FlatState) else state


def params_of(state):
    """What a state's local programs take as parameters: the vector of a `FlatState`, else
    the tree."""
    return state.vector if isinstance(state, FlatState) else state.params
