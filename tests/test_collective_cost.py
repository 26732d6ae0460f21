"""benchmarks/collective_cost.py's table (the engine's sum beside the psum) and its
BENCHMARKS.md section, from planted rows."""

from benchmarks import collective_cost
from experiments.paper import bench_doc


def _row(placement, size, wall, cpu=(1.0, 2.0), engine=None):
    row = {"placement": placement, "size": size, "load": 0.5, "wall_ms": wall, "cpu_ms": cpu}
    return row if engine is None else {**row, "engine_ms": engine}


def test_each_wall_time_is_a_ratio_to_the_same_size_unpinned():
    result = {
        "quotas": [1.0, 0.25],
        "rows": [_row("unpinned", 64, 0.5), _row("unpinned", 4096, 2.0),
                 _row("pinned", 64, 4.0, engine=1.0),
                 _row("quota, pinned", 4096, 11.0, (3.0, 2.5))],
    }  # fmt: skip
    text = bench_doc._collective_cost(result)
    assert "| pinned | 64 | 4.00 | 1.00 | 0.25x | 1.00 / 2.00 | 8.00x |" in text
    assert "| quota, pinned | 4096 | 11.00 | - | - | 3.00 / 2.50 | 5.50x |" in text
    assert "CPU quotas 1.0/0.25 (`launch --cpu_quota`)" in text
    result["quotas"] = None
    assert "(not measured: no writable cgroups)" in bench_doc._collective_cost(result)
    assert collective_cost.table({"rows": [_row("pinned", 1, 1.0)]}).endswith(
        "| - | - | 1.00 / 2.00 | nanx |"
    )


def test_the_waiting_rows_ratio_leaves_out_the_delay_it_waits_for():
    """Process 0 sleeps 20 ms before each call: the row said 21.88 ms and 14.43x unpinned,
    the sleep counted as all-reduce time (1.88 ms: 1.24x)."""
    late = {**_row("unpinned, process 0 20 ms late", 4096, 21.88), "late_ms": 20.0}
    older = _row("unpinned, process 0 20 ms late", 4096, 21.88)  # saved before late_ms
    for row in (late, older):
        text = collective_cost.table({"rows": [_row("unpinned", 4096, 1.52), row]})
        assert text.endswith("| 4096 | 21.88 (20 of it the delay) | - | - | 1.00 / 2.00 | 1.24x |")
