"""The CPUs a process may use: affinity, capped by a cgroup quota (fake cgroup roots)."""

import os

import pytest

from omnilearn_jax.engine import cpus


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@pytest.fixture
def two_cpus(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)


def test_v2_quota_in_cores_and_max_is_none(tmp_path, two_cpus):
    _write(tmp_path / "proc", "0::/jobs/w1\n")
    _write(tmp_path / "root" / "jobs" / "w1" / "cpu.max", "25000 100000\n")
    root, proc = str(tmp_path / "root"), str(tmp_path / "proc")
    assert cpus.quota_cpus(root, proc) == 0.25
    assert cpus.usable_cpus(root, proc) == 1  # a quarter core still runs one thread
    _write(tmp_path / "root" / "jobs" / "w1" / "cpu.max", "max 100000\n")
    assert cpus.quota_cpus(root, proc) is None
    assert cpus.usable_cpus(root, proc) == 2


def test_v1_quota_and_hybrid_hosts(tmp_path, two_cpus):
    _write(tmp_path / "proc", "4:memory:/x\n1:cpu,cpuacct:/w0\n0::/\n")
    _write(tmp_path / "root" / "cpu,cpuacct" / "w0" / "cpu.cfs_quota_us", "150000\n")
    _write(tmp_path / "root" / "cpu,cpuacct" / "w0" / "cpu.cfs_period_us", "100000\n")
    root, proc = str(tmp_path / "root"), str(tmp_path / "proc")
    assert cpus.quota_cpus(root, proc) == 1.5
    assert cpus.usable_cpus(root, proc) == 2
    _write(tmp_path / "root" / "cpu,cpuacct" / "w0" / "cpu.cfs_quota_us", "-1\n")
    assert cpus.quota_cpus(root, proc) is None  # v1's "no limit"; v2's root has no cpu.max


def test_no_affinity_call_and_no_cgroup_file(tmp_path, monkeypatch):
    """macOS has no sched_getaffinity: the machine's count, and no crash."""
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 6)
    assert cpus.affinity_cpus() == 6
    assert cpus.usable_cpus(str(tmp_path), str(tmp_path / "missing")) == 6
