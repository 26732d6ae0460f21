"""Checkpoints (orbax) of everything a run needs to continue exactly.

A checkpoint at step s holds the train state (parameters, optimiser state, step), the
controller's state, the split for step s + 1, the clock's accumulators, and (as JSON) the
eval records so far and the W&B run id. Data position and noise need no saving: the sampler
and the cluster model are functions of (seed, step). Orbax writes each step to a temporary
directory and renames it when complete, so a killed process leaves only whole checkpoints.
The JSON part also holds a CRC-32 of the arrays' bytes and their dtypes (`integrity`), which
a restore checks: orbax reads damaged array bytes back without a word.
"""

from __future__ import annotations

import os
import zlib
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from omnilearn_jax.run.runstore import last_checkpoint_step


def has_checkpoint(workdir: str) -> bool:
    """Whether `workdir` holds a whole checkpoint (runstore.last_checkpoint_step). Reads only
    the directory, so any process may ask it without a collective."""
    return last_checkpoint_step(workdir) is not None


# What orbax raises for a checkpoint folder that is half copied or damaged: an item missing
# (KeyError), bad JSON or a missing array file (ValueError: tensorstore's NOT_FOUND), a file
# gone. Anything else (out of memory, a storage timeout) is no fault of the checkpoint.
UNREADABLE = (KeyError, ValueError, FileNotFoundError, EOFError)


class Checkpointer:
    def __init__(self, workdir: str, *, keep: int = 2):
        self.directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
        self._manager = None
        self._keep = keep

    @property
    def manager(self) -> ocp.CheckpointManager:
        if self._manager is None:  # created on first use: a run that never saves makes no dir
            options = ocp.CheckpointManagerOptions(
                max_to_keep=self._keep, enable_async_checkpointing=False
            )
            self._manager = ocp.CheckpointManager(self.directory, options=options)
        return self._manager

    def latest_step(self) -> int | None:
        if not os.path.isdir(self.directory):
            return None
        return self.manager.latest_step()

    def save(self, step: int, arrays: Any, meta: dict[str, Any]) -> None:
        """`arrays`: a tree of host numpy arrays (`host_tree`), the same on every process."""
        meta = {**meta, INTEGRITY: _integrity(arrays)}
        self.manager.save(
            step,
            args=ocp.args.Composite(
                arrays=ocp.args.StandardSave(arrays), meta=ocp.args.JsonSave(meta)
            ),
        )
        self.manager.wait_until_finished()

    def restore(self, step: int, like: Any) -> tuple[Any, dict[str, Any]]:
        """Restores step `step` into the structure, dtypes and shardings of `like`.

        A checkpoint whose arrays are not `like`'s (written by another version of the code,
        whose controller state had other fields or other shapes) is a ValueError naming the
        arrays that differ; orbax's own report of it failed with an unrelated message, and
        arrays of another shape were restored as saved. Array bytes that no longer match the
        checksum saved with them are a damaged checkpoint (`_unreadable`)."""
        try:
            out = self.manager.restore(
                step,
                args=ocp.args.Composite(
                    arrays=ocp.args.StandardRestore(like), meta=ocp.args.JsonRestore()
                ),
            )
        except Exception as err:  # noqa: BLE001 - only a better message is at stake
            mismatch = self._mismatch(step, like)
            if mismatch:
                raise ValueError(mismatch) from err
            if isinstance(err, UNREADABLE):
                raise ValueError(self._unreadable(step, err)) from err
            raise  # out of memory, a storage timeout: not the checkpoint's fault
        arrays, meta = out["arrays"], out["meta"]
        if _shapes(arrays) != _shapes(like):
            raise ValueError(self._mismatch(step, like))
        saved = meta.pop(INTEGRITY, None)  # absent from checkpoints before it
        read = _integrity(arrays)
        same_dtypes = saved is not None and saved["dtypes"] == read["dtypes"]
        if same_dtypes and saved["crc32"] != read["crc32"]:
            damaged = ValueError("its arrays' bytes do not match the checksum saved with them")
            raise ValueError(self._unreadable(step, damaged))
        return arrays, meta

    def _unreadable(self, step: int, err: Exception) -> str:
        """A checkpoint that cannot be read (half copied, damaged): which one, why in short,
        and the older one still kept that a rerun resumes from once it is removed."""
        earlier = [s for s in self.manager.all_steps() if s < step]
        detail = " ".join(str(err).split())
        detail = detail if len(detail) <= 160 else detail[:157] + "..."
        then = f"resume from step {max(earlier)}" if earlier else "start afresh"
        return (
            f"{self.directory}/{step} cannot be read ({type(err).__name__}: {detail}); remove "
            f"that folder to {then}, or use --config.train.resume=False (or a new workdir)"
        )

    def _mismatch(self, step: int, like: Any) -> str:
        """What differs between the arrays saved at `step` and `like` ('' if nothing does,
        or the saved structure cannot be read)."""
        try:
            reader = ocp.CheckpointManager(
                self.directory,
                options=ocp.CheckpointManagerOptions(read_only=True),
                item_handlers={"arrays": ocp.StandardCheckpointHandler()},
            )
            saved = _shapes(reader.item_metadata(step)["arrays"])
        except Exception:  # noqa: BLE001 - only a better message is at stake
            return ""
        expected = _shapes(like)
        if saved == expected:
            return ""
        extra = ", ".join(sorted(saved.keys() - expected.keys())[:6]) or "none"
        missing = ", ".join(sorted(expected.keys() - saved.keys())[:6]) or "none"
        other = [
            f"{p} {saved[p]} (this code: {expected[p]})"
            for p in sorted(saved.keys() & expected.keys())
            if saved[p] != expected[p]
        ]
        return (
            f"{self.directory} step {step} holds arrays this code's state does not match "
            f"(a checkpoint of another version?): saved only there: {extra}; expected but "
            f"not saved: {missing}; of another shape: {', '.join(other[:6]) or 'none'}. Use "
            "a new workdir, or --config.train.resume=False to start afresh there"
        )

    def restore_meta(self, step: int) -> dict[str, Any]:
        """Only the JSON part (what the arrays' structure depends on, in async runs)."""
        try:
            out = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        except UNREADABLE as err:
            raise ValueError(self._unreadable(step, err)) from err
        return out["meta"]

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()


def host_tree(tree: Any) -> Any:
    """A tree's leaves as host numpy arrays, as a checkpoint holds them; a typed PRNG key
    (`jax.random.key`, in a plug-in's controller state, say) as its key data, which numpy
    holds (the key itself cannot be converted: the run died at its first checkpoint)."""
    return jax.tree.map(lambda a: np.asarray(jax.random.key_data(a) if _is_key(a) else a), tree)


def keys_restored(tree: Any, like: Any) -> Any:
    """`tree` (read back from `host_tree`) with the typed keys of `like` rebuilt from their
    data, with their implementation."""
    return jax.tree.map(
        lambda a, ref: (
            jax.random.wrap_key_data(a, impl=jax.random.key_impl(ref)) if _is_key(ref) else a
        ),
        tree,
        like,
    )


def _is_key(a: Any) -> bool:
    dtype = getattr(a, "dtype", None)
    return dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)


INTEGRITY = "integrity"  # the key of the arrays' checksum and dtypes in a checkpoint's JSON


def _integrity(arrays: Any) -> dict[str, Any]:
    """A CRC-32 of the arrays' bytes in tree order, and their dtypes (a restore into other
    dtypes casts, and then the bytes differ without damage)."""
    crc, dtypes = 0, []
    for leaf in jax.tree.leaves(arrays):
        leaf = np.asarray(leaf)
        crc = zlib.crc32(leaf.tobytes(), crc)
        dtypes.append(str(leaf.dtype))
    return {"crc32": crc, "dtypes": dtypes}


def _shapes(tree: Any) -> dict[str, tuple]:
    """{path 'a/b/c': shape} of a tree of arrays (or of orbax's metadata of one)."""
    tree = getattr(tree, "tree", tree)  # orbax's tree metadata wraps the tree
    flat = jax.tree_util.tree_flatten_with_path(
        tree, is_leaf=lambda x: not isinstance(x, (dict, list, tuple))
    )[0]
    # An empty node (optax's EmptyState) has no leaf in `like`, a None placeholder in orbax's.
    named = {"/".join(_name(k) for k in path): leaf for path, leaf in flat}
    return {p: tuple(getattr(a, "shape", np.shape(a))) for p, a in named.items() if a is not None}


def _name(key: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)
