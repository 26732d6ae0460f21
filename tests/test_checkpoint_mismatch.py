"""A checkpoint whose arrays are not this code's state (another version's controller state,
say) is one user error naming the arrays that differ (run/checkpoint.py). Resuming a run
checkpointed at 1fa1997 with the controller fields of f52fac7 failed inside orbax's own report
of the difference: "The truth value of an array with more than one element is ambiguous"."""

from typing import NamedTuple

import numpy as np
import pytest

from omnilearn_jax.run.checkpoint import Checkpointer


class Old(NamedTuple):
    sizes: np.ndarray
    suspect: np.ndarray


class New(NamedTuple):
    sizes: np.ndarray
    suspect: np.ndarray
    suspect_time: np.ndarray
    seen_time: np.ndarray


def test_a_checkpoint_of_another_state_names_the_arrays_that_differ(tmp_path):
    saved = {"controller": Old(np.arange(4, dtype=np.int32), np.zeros(4, np.int32))}
    ckpt = Checkpointer(str(tmp_path))
    ckpt.save(5, saved, {"evals": []})
    arrays, meta = ckpt.restore(5, saved)  # the same structure restores
    np.testing.assert_array_equal(arrays["controller"].sizes, np.arange(4))
    assert meta == {"evals": []}
    like = {
        "controller": New(*saved["controller"], np.zeros(4, np.float32), np.zeros((), np.float32))
    }
    with pytest.raises(ValueError) as err:
        ckpt.restore(5, like)
    message = str(err.value)
    assert "expected but not saved: controller/seen_time, controller/suspect_time" in message
    assert "saved only there: none" in message
    assert "--config.train.resume=False" in message
    ckpt.close()
