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


def test_every_process_of_a_launched_run_resumes_from_the_config_process_0_wrote(tmp_path):
    """Process 0 writes config.json; process 1 of the same run compares its own config (its
    process id and the launcher's new port differ) and must resume, not call it another run
    (it did: `distributed.process_id: 0 -> 1`, and both processes then aborted)."""
    from omnilearn_jax.run.loop import check_same_config
    from omnilearn_jax.run.runstore import RunStore
    from tests.test_train import smoke_config

    config = smoke_config()
    config.distributed.enabled = True
    config.distributed.process_id = 0
    config.distributed.coordinator_address = "127.0.0.1:5001"
    RunStore(str(tmp_path)).write_config(config.to_dict())
    config.distributed.process_id = 1
    config.distributed.coordinator_address = "127.0.0.1:5002"
    check_same_config(str(tmp_path), config)
    config.distributed.num_processes = 3  # another run
    with pytest.raises(ValueError, match=r"distributed.num_processes: 0 -> 3"):
        check_same_config(str(tmp_path), config)


def test_arrays_of_another_shape_are_named_not_restored_as_saved(tmp_path):
    """Same paths, another shape (the guard's memory of 5 steps where this code keeps 7): the
    saved (4, 5) array came back and the run went on with it."""
    ckpt = Checkpointer(str(tmp_path))
    ckpt.save(5, {"recent": np.zeros((4, 5), np.float32)}, {"evals": []})
    with pytest.raises(
        ValueError, match=r"of another shape: recent \(4, 5\) \(this code: \(4, 7\)\)"
    ):
        ckpt.restore(5, {"recent": np.zeros((4, 7), np.float32)})


def test_damaged_array_bytes_are_a_checkpoint_that_cannot_be_read(tmp_path):
    """Bytes flipped inside the array data (a small model's, which OCDBT keeps in one data
    file) were read back as they were, a NaN loss two steps later blamed on the run; the
    checksum saved beside them finds them."""
    rng = np.random.default_rng(0)
    shapes = {"a": (64, 32), "b": (32,), "c": (32, 10), "d": (10,)}
    tree = {k: rng.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    Checkpointer(str(tmp_path)).save(5, tree, {"evals": []})
    files = (tmp_path / "checkpoints" / "5" / "arrays").rglob("*")
    data = max((f for f in files if f.parent.name == "d"), key=lambda f: f.stat().st_size)
    raw = bytearray(data.read_bytes())
    for i in range(len(raw) // 3, len(raw) // 3 + 64):
        raw[i] ^= 0xFF
    data.write_bytes(bytes(raw))
    like = {k: np.zeros_like(v) for k, v in tree.items()}
    with pytest.raises(ValueError, match="bytes do not match the checksum saved with them"):
        Checkpointer(str(tmp_path)).restore(5, like)
