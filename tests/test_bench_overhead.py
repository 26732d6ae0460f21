"""benchmarks/step_overhead.py and its BENCHMARKS.md section: the medians and worst cases
come from the runs, per split (the runs are planted: nothing is timed here)."""

from benchmarks import step_overhead
from experiments.paper import bench_doc


def test_overhead_is_summarised_per_split_and_rendered(monkeypatch):
    planted = iter([(2.2, 1.4), (1.8, 1.2), (2.6, 1.3), (1.9, 1.25), (2.0, 1.25), (1.8, 1.0)])
    # Each run's pair with the reduction and update dispatched late: uneven 2.75, 2.6, 2.5 ms
    late = iter([(2.75, 1.4), (2.0, 1.2), (2.6, 1.3), (2.0, 1.25), (2.5, 1.25), (2.0, 1.0)])

    def fake(sizes, steps, early):
        step, busiest = next(planted if early else late)
        return {"sizes": list(sizes), "early": early, "step_ms": step, "busiest_ms": busiest,
                "overhead": step / busiest - 1, "load": 0.5}  # fmt: skip

    monkeypatch.setattr(step_overhead, "overhead", fake)
    out = step_overhead.measure((16, 16, 16, 80), steps=10, reps=3, echo=lambda line: None)
    uneven, uniform = out["splits"]["uneven"], out["splits"]["uniform"]
    assert uniform["sizes"] == [32, 32, 32, 32]
    # uneven runs: 2.2/1.4, 2.6/1.3, 2.0/1.25 -> overheads 57%, 100%, 60%
    assert abs(uneven["overhead_median"] - 0.6) < 1e-12
    assert abs(uneven["overhead_worst"] - 1.0) < 1e-12
    assert uneven["step_ms"] == 2.2 and uneven["busiest_ms"] == 1.3
    # uniform runs: 1.8/1.2, 1.9/1.25, 1.8/1.0 -> 50%, 52%, 80%
    assert abs(uniform["overhead_worst"] - 0.8) < 1e-12
    # early / late per pair: 2.2/2.75 = 0.8, 2.6/2.6 = 1, 2.0/2.5 = 0.8
    assert abs(uneven["early_over_late"] - 0.8) < 1e-12
    assert abs(uneven["early_over_late_worst"] - 1.0) < 1e-12
    assert uneven["late_step_ms"] == 2.6
    text = bench_doc._step_overhead(out)
    assert "| 16, 16, 16, 80 | 2.2 | 1.3 | 60% | 100% | 2.6 | 100% | 0.8 (1) |" in text
