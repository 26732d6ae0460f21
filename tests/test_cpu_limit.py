"""The CPUs a quota leaves a process (run/cpu_limit.py), read from fake cgroup trees, and
JAX's host threads sized to them in a fresh process."""

import os
import subprocess
import sys
import threading

import pytest

from omnilearn_jax.run import cgroups, cpu_limit

LINUX = hasattr(os, "sched_getaffinity")


def _v2(tmp_path, quotas: dict[str, str]) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory\n")
    for group, text in quotas.items():
        (tmp_path / group).mkdir(parents=True, exist_ok=True)
        (tmp_path / group / "cpu.max").write_text(text)


def test_v2_limit_is_the_tightest_quota_of_the_group_and_its_parents(tmp_path):
    _v2(tmp_path, {"job": "150000 100000", "job/p0": "max 100000", "job/p1": "4000 16000"})
    proc = tmp_path / "proc_cgroup"
    proc.write_text("0::/job/p1\n")
    assert cpu_limit.cpu_limit(tmp_path, proc, environ={}) == pytest.approx(0.25)
    proc.write_text("0::/job/p0\n")  # no quota of its own: the parent's 1.5 cores
    assert cpu_limit.cpu_limit(tmp_path, proc, environ={}) == pytest.approx(1.5)
    proc.write_text("0::/\n")
    assert cpu_limit.cpu_limit(tmp_path, proc, environ={}) is None
    # --quota_from=steps: the group the launcher named, which the process joins later.
    named = {cgroups.ENV: str(tmp_path / "job" / "p1")}
    assert cpu_limit.cpu_limit(tmp_path, proc, environ=named) == pytest.approx(0.25)


def test_v1_limit_reads_the_cpu_hierarchy_and_unlimited_is_none(tmp_path):
    cpu = tmp_path / "cpu"
    (cpu / "omnilearn-1" / "p0").mkdir(parents=True)
    for group, quota in (
        (cpu, "-1"),
        (cpu / "omnilearn-1", "-1"),
        (cpu / "omnilearn-1" / "p0", "8000"),
    ):
        (group / "cpu.cfs_quota_us").write_text(quota + "\n")
        (group / "cpu.cfs_period_us").write_text("4000\n")
    proc = tmp_path / "proc_cgroup"
    proc.write_text("2:cpuacct:/\n1:cpu:/omnilearn-1/p0\n0::/\n")
    assert cpu_limit.cpu_limit(tmp_path, proc, environ={}) == pytest.approx(2.0)
    proc.write_text("1:cpu:/omnilearn-1\n")
    assert cpu_limit.cpu_limit(tmp_path, proc, environ={}) is None
    assert cpu_limit.cpu_limit(tmp_path / "nowhere", proc, environ={}) is None


@pytest.mark.skipif(not LINUX or len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores")
def test_threads_started_inside_get_the_whole_mask_back():
    allowed = os.sched_getaffinity(0)
    seen = {}

    def started_inside():
        seen["inside"] = os.sched_getaffinity(0)
        done.wait()

    done = threading.Event()
    with cpu_limit.threads_for_limit(1.0) as narrowed:
        assert narrowed == 1 and len(os.sched_getaffinity(0)) == 1
        worker = threading.Thread(target=started_inside)
        worker.start()
        while "inside" not in seen:
            pass
    assert len(seen["inside"]) == 1 and os.sched_getaffinity(0) == allowed
    assert os.sched_getaffinity(worker.native_id) == allowed
    done.set()
    worker.join()
    with cpu_limit.threads_for_limit(float(len(allowed))) as narrowed:  # nothing to narrow
        assert narrowed is None and os.sched_getaffinity(0) == allowed


PROBE = """
import os, sys
from omnilearn_jax.run import cpu_limit
limit = float(sys.argv[1]) if sys.argv[1] not in ("none", "default") else None
if sys.argv[1] != "none":
    with cpu_limit.threads_for_limit(limit):
        import jax
        jax.devices()
else:
    import jax
    jax.devices()
names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
print(sum(n.startswith("tf_XLAEigen") for n in names), len(os.sched_getaffinity(0)))
"""


@pytest.mark.skipif(not LINUX or len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores")
def test_xla_sizes_its_compute_pool_to_the_limit():
    cores = len(os.sched_getaffinity(0))

    def probe(limit: str, shared: int = 0) -> list[int]:
        env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
        env["JAX_PLATFORMS"] = "cpu"
        env.pop(cpu_limit.SHARED_ENV, None)
        if shared:
            env[cpu_limit.SHARED_ENV] = str(shared)
        out = subprocess.run(
            [sys.executable, "-c", PROBE, limit], capture_output=True, text=True, env=env
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return [int(v) for v in out.stdout.split()]

    assert probe("none") == [cores, cores]  # one Eigen thread a core of the mask
    assert probe("1.0") == [1, cores]  # one under a one-core limit; the mask given back
    # As many processes of the launcher's as cores share the mask: a core's worth each.
    assert probe("default", shared=cores) == [1, cores]


@pytest.mark.skipif(not LINUX or len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores")
def test_a_quota_above_the_fair_share_sizes_the_threads(monkeypatch):
    # Processes as many as the cores share them (a fair share of 1 core each), and this one
    # has a quota of 1.5 cores: it may use 2 cores' threads, not the fair share's 1.
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setenv(cpu_limit.SHARED_ENV, str(cores))
    monkeypatch.setattr(cpu_limit, "cpu_limit", lambda: 1.5)
    with cpu_limit.threads_for_limit() as narrowed:
        assert narrowed == (2 if cores > 2 else None)
    monkeypatch.setattr(cpu_limit, "cpu_limit", lambda: None)  # no quota: the fair share
    with cpu_limit.threads_for_limit() as narrowed:
        assert narrowed == 1


def test_throttled_seconds_read_from_v1_and_v2_cpu_stat():
    from benchmarks.quota_throttle import throttled

    assert throttled({"nr_throttled": "3", "throttled_time": "2500000000"}) == 2.5  # v1: ns
    assert throttled({"nr_throttled": "3", "throttled_usec": "1500000"}) == 1.5  # v2: µs
    assert throttled({"nr_periods": "0"}) == 0.0


def test_programs_run_in_the_calling_thread_only_at_one_core_of_a_larger_mask():
    # threads_for_limit yields the cores it narrowed to: 1 under a quota of at most one core
    # (or a fair share of one) with more in the mask; None with nothing narrowed (pinned, or
    # no quota); 2 at 1.5 cores. Only for a process of one device.
    assert [cpu_limit.dispatch_for(n, 1, 1, 2) for n in (1, None, 2)] == [True, False, False]
    assert [cpu_limit.dispatch_for(1, 1, d, 2) for d in (0, 2, 8)] == [False, False, False]
    # Without a quota: one device a process, of several, unpinned; not pinned to one core,
    # not one process alone, not several devices a process (the one-process baseline).
    cases = [(2, 1, 2), (2, 1, 1), (1, 1, 2), (2, 2, 2), (0, 1, 2)]
    assert [cpu_limit.dispatch_for(None, *c) for c in cases] == [True, False, False, False, False]


def test_a_launched_process_counts_on_its_share_of_the_cores_it_shares():
    from omnilearn_jax.run.launch import sharing

    env = cpu_limit.SHARED_ENV
    assert cpu_limit.fair_share(2, {env: "2"}) == 1.0
    assert cpu_limit.fair_share(16, {env: "3"}) == pytest.approx(16 / 3)
    assert [cpu_limit.fair_share(4, e) for e in ({env: "1"}, {}, {env: "x"})] == [None] * 3
    assert sharing((), 3) == [3, 3, 3]  # none pinned: all share every core
    a, b, ab = frozenset({0}), frozenset({1}), frozenset({0, 1})
    assert sharing((a, b), 2) == [1, 1]  # a core each
    assert sharing((ab, ab, b), 3) == [3, 3, 3]
    assert sharing((a, ab, b), 3) == [2, 3, 2]


def test_the_configs_cpu_dispatch_forces_either_way_and_rejects_others():
    rule = (None, 2, 1, 2)  # one device a process of two, unpinned: the rule says the caller
    assert [cpu_limit.in_caller(c, *rule) for c in cpu_limit.DISPATCH] == [True, False, True]
    alone = (None, 1, 1, 2)
    assert [cpu_limit.in_caller(c, *alone) for c in cpu_limit.DISPATCH] == [False, False, True]
    with pytest.raises(ValueError, match="unknown cpu_dispatch 'threads'; valid values: auto"):
        cpu_limit.in_caller("threads", None)
