"""The async study's tools: staleness in rows, and the staleness-free control (issue 28)."""

import numpy as np
import pytest

from experiments.async_fresh import fresh_gradients
from omnilearn_jax.analysis.staleness import rows_between, weighted_mean
from omnilearn_jax.run.job import train_and_evaluate
from omnilearn_jax.run.runstore import read_metrics
from tests.test_async import _config, _max_diff, _params


def test_rows_between_pull_and_push():
    # Updates of 32, 10, 98 and 32 rows; the 2nd was pulled before the 1st was applied, the
    # 3rd before the 1st and 2nd, the 4th right after the 3rd.
    rows = rows_between([0, 1, 2, 0], [32, 10, 98, 32])
    assert rows.tolist() == [0, 32, 42, 0]
    # Per sample: (0 * 32 + 32 * 10 + 42 * 98 + 0 * 32) / 172.
    assert weighted_mean(rows, [32, 10, 98, 32]) == pytest.approx((320 + 42 * 98) / 172)
    with pytest.raises(ValueError):
        rows_between([0, 2], [32, 32])  # stale by more updates than were applied


def _schedule(path):
    keys = ("worker", "worker_batch", "staleness", "time")
    return [tuple(r[k] for k in keys) for r in read_metrics(path) if "staleness" in r]


def _losses(path):
    return [r["loss"] for r in read_metrics(path) if "staleness" in r]


def test_fresh_control_keeps_the_schedule_and_takes_current_gradients(tmp_path):
    common = dict(train__num_steps=12, train__eval_every=100, asp__staleness_bound=0)
    c = _config(num_workers=4, num_devices=4, mode="asp", **common)
    train_and_evaluate(c, str(tmp_path / "async"))
    with fresh_gradients():
        train_and_evaluate(c, str(tmp_path / "fresh"))
    # The same updates in the same order: worker, rows, versions stale, time.
    assert _schedule(tmp_path / "async") == _schedule(tmp_path / "fresh")
    a, f = _losses(tmp_path / "async"), _losses(tmp_path / "fresh")
    # Update 1 is taken at the initial parameters in both; update 2 (1 version stale) is
    # taken at the pulled parameters in the async run, at the updated ones in the control.
    assert a[0] == pytest.approx(f[0], abs=1e-6)
    assert abs(a[1] - f[1]) > 1e-4
    assert _max_diff(_params(tmp_path / "async"), _params(tmp_path / "fresh")) > 1e-4


def test_fresh_control_with_one_worker_is_the_async_run(tmp_path):
    """One worker is never stale: the control changes nothing."""
    c = _config(num_workers=1, num_devices=1, mode="asp", train__num_steps=8)
    train_and_evaluate(c, str(tmp_path / "async"))
    with fresh_gradients():
        train_and_evaluate(c, str(tmp_path / "fresh"))
    assert _max_diff(_params(tmp_path / "async"), _params(tmp_path / "fresh")) <= 1e-6
    assert np.allclose(_losses(tmp_path / "async"), _losses(tmp_path / "fresh"), atol=1e-6)


def test_a_rerun_at_another_budget_and_a_document_of_other_runs_are_refused(tmp_path, capsys):
    """A rerun at --budget 8 over runs of 0.1 s ran nothing and said nothing (the resume key
    held no budget); the document then said '8 virtual seconds' of 0.1 s runs."""
    import json

    import pytest

    from experiments import async_fair, async_fair_doc

    runs = tmp_path / "runs.jsonl"
    key = {"setting": "share_m0", "arm": "async", "lr": 0.1, "seed": 0, "fresh": False}
    runs.write_text(json.dumps({**key, "budget": 0.1}) + "\n")
    for argv, message in [
        (["--out", str(runs), "--budget", "8"], "holds runs of budget [0.1], not 8.0"),
        (["--out", str(runs), "--settings", "bogus"], "--settings ['bogus']: valid ones are"),
        (["--out", str(runs), "--seeds", "0"], "--seeds and --eval_every >= 1"),
    ]:
        with pytest.raises(SystemExit):
            async_fair.main(argv)
        assert message in capsys.readouterr().err
    with pytest.raises(SystemExit):
        async_fair_doc.main(["--runs", str(runs), "--budget", "8", "--data", str(tmp_path / "d")])
    assert "--runs holds runs of budget [0.1]; one budget a document" in capsys.readouterr().err
