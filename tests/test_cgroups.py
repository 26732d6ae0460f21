"""CPU-quota groups against a fake cgroup root in a temporary folder: no cgroup permission
and no JAX needed. The fake kernel is two rules of the real one: a group's control files do
not stop `rmdir`, a live pid in its `cgroup.procs` does (EBUSY)."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.ablation import spec, sweep
from experiments.ablation.runner import cell_command
from omnilearn_jax.run import cgroups, launch

_REAL_RMDIR = Path.rmdir


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(autouse=True)
def fake_kernel(monkeypatch):
    def rmdir(self):
        procs = self / "cgroup.procs"
        if procs.is_file() and any(_alive(int(p)) for p in procs.read_text().split()):
            raise OSError(errno.EBUSY, "Device or resource busy", str(self))
        for f in self.iterdir():
            if f.is_file():
                f.unlink()
        _REAL_RMDIR(self)

    monkeypatch.setattr(Path, "rmdir", rmdir)


def v1_root(tmp_path: Path) -> Path:
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000")
    return tmp_path


def v2_root(tmp_path: Path) -> Path:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "cgroup.subtree_control").write_text("")
    return tmp_path


def _reaped_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def entries(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


@pytest.mark.parametrize(
    "fraction, period_us, expected",
    [
        (1.0, 4000, (4000, 4000)),
        (0.25, 4000, (1000, 4000)),
        (0.125, 4000, (1000, 8000)),  # the kernel's 1 ms minimum quota lengthens the period
        (0.3, 2000, (1000, 3334)),
        (2.0, 4000, (8000, 4000)),
        (0.5, 500, (1000, 2000)),  # nor may the period itself be under 1 ms
    ],
)
def test_quota_and_period(fraction, period_us, expected):
    assert cgroups.quota_and_period(fraction, period_us) == expected


def test_v1_groups_hold_quota_and_period(tmp_path):
    groups = cgroups.create([1.0, 0.25], root=v1_root(tmp_path))
    parent = tmp_path / "cpu" / f"omnilearn-{os.getpid()}"
    assert [g.path for g in groups] == [parent / "p0", parent / "p1"]
    assert (parent / "p0" / "cpu.cfs_period_us").read_text() == "4000"
    assert (parent / "p0" / "cpu.cfs_quota_us").read_text() == "4000"
    assert (parent / "p1" / "cpu.cfs_period_us").read_text() == "4000"
    assert (parent / "p1" / "cpu.cfs_quota_us").read_text() == "1000"
    assert not (parent / "p1" / "cpu.max").exists()


def test_v2_groups_hold_cpu_max_and_delegate_cpu(tmp_path):
    groups = cgroups.create([0.5, 0.125], root=v2_root(tmp_path), period_us=2000)
    parent = tmp_path / f"omnilearn-{os.getpid()}"
    assert [(g.quota_us, g.period_us) for g in groups] == [(1000, 2000), (1000, 8000)]
    assert (parent / "p0" / "cpu.max").read_text() == "1000 2000"
    assert (parent / "p1" / "cpu.max").read_text() == "1000 8000"
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+cpu"
    assert (parent / "cgroup.subtree_control").read_text() == "+cpu"
    assert not (parent / "p0" / "cpu.cfs_quota_us").exists()


def test_v2_is_chosen_only_with_the_cpu_controller(tmp_path):
    v1_root(tmp_path)
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")  # a hybrid machine
    assert cgroups.detect(tmp_path) == cgroups.Layout(1, tmp_path / "cpu")


def test_a_child_joins_its_group_and_its_core_before_exec(tmp_path):
    core = min(os.sched_getaffinity(0))
    with cgroups.quota_groups([0.5], root=v1_root(tmp_path), cpus=[frozenset({core})]) as groups:
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid(), *os.sched_getaffinity(0))"],
            preexec_fn=groups[0].enter,
            capture_output=True,
            text=True,
            check=True,
        )
        pid, *cores = map(int, child.stdout.split())
        assert (groups[0].path / "cgroup.procs").read_text() == str(pid)
        assert cores == [core]
    assert entries(tmp_path / "cpu") == ["cpu.cfs_period_us", "cpu.cfs_quota_us"]


def test_groups_are_removed_after_a_failure(tmp_path):
    root = v2_root(tmp_path)
    with pytest.raises(RuntimeError, match="step 3"), cgroups.quota_groups([1.0, 0.5], root=root):
        raise RuntimeError("NaN at step 3")
    assert entries(tmp_path) == ["cgroup.controllers", "cgroup.subtree_control"]


def test_a_busy_group_is_left_and_named(tmp_path, capsys):
    with cgroups.quota_groups([1.0, 0.5], root=v1_root(tmp_path)) as groups:
        groups[1].enter()  # this test's own pid: alive, so the fake kernel says EBUSY
    parent = tmp_path / "cpu" / f"omnilearn-{os.getpid()}"
    assert [p.name for p in parent.iterdir() if p.is_dir()] == ["p1"]
    assert f"cgroups left behind (still busy): {parent / 'p1'}" in capsys.readouterr().err


def test_the_next_start_sweeps_groups_of_killed_launchers(tmp_path):
    base = v1_root(tmp_path) / "cpu"
    stale, live = base / f"omnilearn-{_reaped_pid()}", base / f"omnilearn-{os.getppid()}"
    for group in (stale / "p0", stale / "p1", live / "p0", base / "someone-else"):
        group.mkdir(parents=True)
        (group / "cgroup.procs").write_text("")
    cgroups.create([0.5], root=tmp_path)
    assert [p for p in entries(base) if not p.startswith("cpu.")] == sorted(
        [live.name, "someone-else", f"omnilearn-{os.getpid()}"]
    )
    assert entries(live) == ["p0"]


def _one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message
    assert "--config.hetero.inject=" in message and "taskset" in message
    return message


def test_no_cpu_controller_is_a_one_line_error(tmp_path):
    with pytest.raises(cgroups.CgroupError) as error:
        cgroups.create([0.5], root=tmp_path)
    assert _one_line(error).startswith(f"no cgroup cpu controller under {tmp_path} ")


def test_an_unwritable_root_is_a_one_line_error(tmp_path, monkeypatch):
    v1_root(tmp_path)

    def refuse(self, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", refuse)
    with pytest.raises(cgroups.CgroupError) as error:
        cgroups.create([0.5], root=tmp_path)
    expected = f"cannot create CPU-quota groups under {tmp_path / 'cpu'} (Permission denied): "
    assert _one_line(error).startswith(expected)


@pytest.mark.parametrize(
    "make_root, refused, reason",
    [
        (v1_root, "cpu/omnilearn-{pid}/p1/cpu.cfs_quota_us", "Invalid argument"),
        (v2_root, "cgroup.subtree_control", "Device or resource busy"),  # a container's root
    ],
)
def test_a_refused_write_removes_what_was_made(tmp_path, monkeypatch, make_root, refused, reason):
    make_root(tmp_path)
    target = tmp_path / refused.format(pid=os.getpid())
    write = Path.write_text

    def write_text(self, data, *args, **kwargs):
        if self == target:
            code = errno.EINVAL if reason == "Invalid argument" else errno.EBUSY
            raise OSError(code, reason, str(self))
        return write(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with pytest.raises(cgroups.CgroupError) as error:
        cgroups.create([1.0, 0.25], root=tmp_path)
    assert f"({reason})" in _one_line(error)
    base = tmp_path / "cpu" if make_root is v1_root else tmp_path
    assert not any(p.name.startswith("omnilearn-") for p in base.iterdir())


def test_parse_quotas():
    assert cgroups.parse_quotas("1.0, 0.25", 2, ncpu=2) == (1.0, 0.25)
    with pytest.raises(ValueError, match="gives 1 quotas for 2 processes"):
        cgroups.parse_quotas("1.0", 2, ncpu=2)
    with pytest.raises(ValueError, match=r"0.0 is outside \(0, 2\]"):
        cgroups.parse_quotas("1,0", 2, ncpu=2)
    with pytest.raises(ValueError, match=r"2.5 is outside \(0, 2\]"):
        cgroups.parse_quotas("2.5,1", 2, ncpu=2)
    with pytest.raises(ValueError, match="numbers separated by commas"):
        cgroups.parse_quotas("1.0;0.5", 2, ncpu=2)
    # The period would pass 1 s: it failed later as "cannot create CPU-quota groups" as root.
    with pytest.raises(ValueError, match=r"0.0009 is below 0.001 of a core"):
        cgroups.parse_quotas("1.0,0.0009", 2, ncpu=2)
    assert cgroups.quota_and_period(0.001) == (1000, 1_000_000)  # the least that fits


def test_parse_cpus():
    assert cgroups.parse_cpus("0,1", 2, allowed={0, 1}) == (frozenset({0}), frozenset({1}))
    assert cgroups.parse_cpus("0-2,3", 2, allowed={0, 1, 2, 3}) == (
        frozenset({0, 1, 2}),
        frozenset({3}),
    )
    with pytest.raises(ValueError, match="gives 1 entries for 2 processes"):
        cgroups.parse_cpus("0", 2, allowed={0, 1})
    with pytest.raises(ValueError, match=r"'2' is not within the cores \[0, 1\]"):
        cgroups.parse_cpus("0,2", 2, allowed={0, 1})
    with pytest.raises(ValueError, match="'a' is not a core or a range"):
        cgroups.parse_cpus("0,a", 2, allowed={0, 1})


def test_auto_deals_the_cores_out_fit_only_a_core_a_process_and_none_pins_nothing():
    one = lambda *c: frozenset(c)  # noqa: E731
    assert cgroups.parse_cpus("auto", 2, allowed={0, 1}) == (one(0), one(1))
    assert cgroups.parse_cpus("auto", 2, allowed={2, 3, 5, 7, 8}) == (one(2, 3, 5), one(7, 8))
    assert cgroups.parse_cpus("auto", 4, allowed={0, 1}) == (one(0), one(1), one(0), one(1))
    assert cgroups.parse_cpus("auto", 1, allowed={0, 1}) == (one(0, 1),)
    assert cgroups.parse_cpus("none", 3, allowed={0, 1}) == ()
    assert cgroups.parse_cpus("fit", 2, allowed={0, 1}) == (one(0), one(1))
    assert cgroups.parse_cpus("fit", 2, allowed={2, 3, 5}) == (one(2, 3), one(5))
    assert cgroups.parse_cpus("fit", 3, allowed={0, 1}) == ()  # fewer cores than processes
    # auto and fit are over the cores the launcher may use itself; fit is the default.
    args, _ = launch.parse(["--num_processes=2", "--cpus=auto", "--", "--x"])
    assert args.cpus == cgroups.spread_cpus(2, os.sched_getaffinity(0))
    default = launch.parse(["--num_processes=2", "--", "--x"])[0].cpus
    assert default == cgroups.parse_cpus("fit", 2)
    assert launch.parse(["--num_processes=2", "--cpus=none", "--", "--x"])[0].cpus == ()


def test_without_an_affinity_call_fit_pins_nothing_and_cores_asked_for_are_a_user_error(
    monkeypatch,
):
    """Where the OS has no sched_getaffinity (macOS), the launcher's default still runs."""
    monkeypatch.delattr(os, "sched_getaffinity")
    assert cgroups.parse_cpus("fit", 2) == cgroups.parse_cpus("none", 2) == ()
    for text in ("auto", "0,1"):
        with pytest.raises(ValueError, match="give --cpus=none"):
            cgroups.parse_cpus(text, 2)


# The launcher's wiring, with a stand-in for main.py: each child prints its pid, what its
# group's cgroup.procs holds when it runs, and its cores.
_CHILD = """
import glob, os, sys
root, i = sys.argv[1:]
[procs] = glob.glob(os.path.join(root, "cpu", "omnilearn-*", f"p{i}", "cgroup.procs"))
print(os.getpid(), open(procs).read(), *sorted(os.sched_getaffinity(0)))
"""


def _stand_in(monkeypatch, tmp_path, script: str) -> None:
    """A fake cgroup root, and `script` (argv: that root, the process index) as main.py."""
    monkeypatch.setattr(cgroups, "ROOT", str(v1_root(tmp_path)))
    monkeypatch.setattr(
        launch,
        "process_command",
        lambda args, *, process_id, **_: [
            sys.executable,
            "-c",
            script,
            str(tmp_path),
            str(process_id),
        ],  # fmt: skip
    )


def test_the_launcher_runs_each_process_in_its_group(tmp_path, monkeypatch, capsys):
    _stand_in(monkeypatch, tmp_path, _CHILD)
    core = min(os.sched_getaffinity(0))
    argv = ["--num_processes=2", "--cpu_quota=0.5,0.25", f"--cpus={core},{core}", "--", "--x"]
    assert launch.main(argv) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    started = {int(w[3]): int(w[5]) for w in lines if w[:2] == ["[launch]", "started"]}
    seen = {int(w[0][2]): [int(x) for x in w[1:]] for w in lines if w[0] in ("[p0]", "[p1]")}
    assert seen == {i: [pid, pid, core] for i, pid in started.items()}
    assert entries(tmp_path / "cpu") == ["cpu.cfs_period_us", "cpu.cfs_quota_us"]


def test_the_launcher_stops_with_one_line_where_cgroups_are_missing(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cgroups, "ROOT", str(tmp_path))
    assert launch.main(["--num_processes=2", "--cpu_quota=1,0.5", "--", "--x"]) == 1
    out, err = capsys.readouterr()
    assert out == ""  # nothing started
    assert err.startswith(f"[launch] no cgroup cpu controller under {tmp_path} ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    "option, message",
    [
        ("--cpu_quota=1.0", "--cpu_quota gives 1 quotas for 2 processes: one each"),
        (f"--cpu_quota=1,{os.cpu_count() + 1}", f"is outside (0, {os.cpu_count()}]"),
        ("--cpus=0", "--cpus gives 1 entries for 2 processes"),
    ],
)
def test_the_launcher_rejects_bad_quotas_before_starting(option, message, capsys):
    with pytest.raises(SystemExit) as stop:
        launch.parse(["--num_processes=2", option, "--", "--x"])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


_CORE = min(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0


def _ablation(**keys):
    base = Path(__file__).parents[1] / "configs" / "paper_bsp.py"
    config = {"base": f"{base}:runlocal,model=mlp", "grid": {"seed": (0,)}, **keys}
    return spec.from_config(config)


def test_an_ablation_gives_every_cell_the_launchers_quotas_and_cores(tmp_path):
    core = min(os.sched_getaffinity(0))
    ablation = _ablation(num_processes=2, cpu_quota=(0.5, 0.25), cpus=f"{core},{core}")
    cmd = cell_command(ablation, ablation.cells()[0], str(tmp_path))
    launcher = cmd[cmd.index("omnilearn_jax.launch") + 1 : cmd.index("--")]
    assert launcher == [
        "--num_processes=2",
        "--devices_per_process=2",  # the base's cpu_devices=4, split over 2 processes
        "--cpu_quota=0.5,0.25",
        f"--cpus={core},{core}",
    ]
    entry = f"--devices_per_process=2 --cpu_quota=0.5,0.25 --cpus={core},{core} --"
    assert sweep.sweep_dict(ablation)["command"][3].count(entry) == 1  # bash -c SCRIPT


@pytest.mark.parametrize(
    "keys, message",
    [
        ({"cpu_quota": (0.5,)}, "ablation cpu_quota and cpus need num_processes > 1"),
        ({"num_processes": 2, "cpu_quota": (0.5,)}, "ablation cpu_quota gives 1 quotas for 2"),
        ({"num_processes": 2, "cpu_quota": 0.5}, "ablation cpu_quota must be a tuple"),
        ({"num_processes": 2, "cpus": "0"}, "ablation cpus gives 1 entries for 2 processes"),
        (
            {"num_processes": 2, "cpu_quota": (1, 1), "cpus": f"{_CORE},{_CORE}"},
            "ablation cpu_quota gives processes 0, 1 2 cores in all",
        ),
    ],
)
def test_an_ablation_rejects_bad_quotas_before_any_cell(keys, message):
    with pytest.raises(ValueError, match=message):
        _ablation(**keys)


def test_a_deferred_group_is_joined_only_where_the_launcher_named_one(tmp_path):
    [group] = cgroups.create([0.25], root=v1_root(tmp_path))
    env = {"OTHER": "1"}
    assert cgroups.enter_deferred(env) is None
    assert not (group.path / "cgroup.procs").exists()  # nothing joined
    env[cgroups.ENV] = str(group.path)
    assert cgroups.enter_deferred(env) == group.path
    assert (group.path / "cgroup.procs").read_text() == str(os.getpid())
    assert env == {"OTHER": "1"}  # named once: a process it starts does not join again
    (group.path / "cgroup.procs").write_text("")  # let the fake kernel remove it
    cgroups.release([group])


# With --quota_from=steps a child starts outside its group, on its cores, told its group.
_DEFERRED_CHILD = """
import glob, os, sys
root, i = sys.argv[1:]
[group] = glob.glob(os.path.join(root, "cpu", "omnilearn-*", f"p{i}"))
procs = os.path.join(group, "cgroup.procs")
told = os.environ.get("OMNILEARN_QUOTA_GROUP", "")
quotas = os.environ["OMNILEARN_CPU_QUOTA"], os.environ["OMNILEARN_CPU_QUOTAS"]
print(os.path.exists(procs) and open(procs).read() or "-", told == group, *quotas,
      *sorted(os.sched_getaffinity(0)))
"""


def test_with_quota_from_steps_a_child_starts_outside_its_group_and_is_told_it(
    tmp_path, monkeypatch, capsys
):
    _stand_in(monkeypatch, tmp_path, _DEFERRED_CHILD)
    core = min(os.sched_getaffinity(0))
    argv = ["--num_processes=2", "--cpu_quota=0.5,0.25", f"--cpus={core},{core}"]
    assert launch.main([*argv, "--quota_from=steps", "--", "--x"]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    seen = sorted(w[1:] for w in lines if w[0] in ("[p0]", "[p1]"))
    # Nobody in the group, both told theirs, and each its quota and every process's.
    assert seen == [["-", "True", q, "0.5,0.25", str(core)] for q in ("0.25", "0.5")]
    assert cgroups.launched_quotas({cgroups.QUOTAS_ENV: "1,0.5"}) == [1.0, 0.5]
    assert cgroups.launched_quotas({}) == []
    assert entries(tmp_path / "cpu") == ["cpu.cfs_period_us", "cpu.cfs_quota_us"]


def test_quota_from_needs_a_quota_and_a_known_value(capsys):
    with pytest.raises(SystemExit):
        launch.parse(["--num_processes=2", "--quota_from=steps", "--", "--x"])
    assert "--quota_from says when --cpu_quota applies" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        launch.parse(["--num_processes=2", "--cpu_quota=1,1", "--quota_from=later", "--", "--x"])
    assert "invalid choice: 'later'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="quota_from is one of"):
        launch.launch(["--x"], num_processes=1, quota_from="later")


def test_an_ablation_passes_quota_from_to_the_launcher(tmp_path):
    ablation = _ablation(num_processes=2, cpu_quota=(1, 0.25), quota_from="steps")
    cmd = cell_command(ablation, ablation.cells()[0], str(tmp_path))
    assert cmd[cmd.index("--cpu_quota=1.0,0.25") + 1] == "--quota_from=steps"
    with pytest.raises(ValueError, match="ablation quota_from is one of"):
        _ablation(num_processes=2, cpu_quota=(1, 0.25), quota_from="later")
    with pytest.raises(ValueError, match="give cpu_quota too"):
        _ablation(num_processes=2, quota_from="steps")


def test_launch_from_python_pins_by_default_as_the_command_line_does(monkeypatch):
    """`launch.launch` called from Python deals the cores out (`fit`) as `--cpus` does by
    default; `cpus="none"` pins nothing."""

    class Started(Exception):
        pass

    seen = []
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(launch, "_enter", lambda group, cpus: seen.append(cpus))

    def popen(*args, **kwargs):
        raise Started

    monkeypatch.setattr(launch.subprocess, "Popen", popen)
    for cpus, first in (("fit", frozenset({0})), ("none", frozenset())):
        kwargs = {} if cpus == "fit" else {"cpus": cpus}
        with pytest.raises(Started):
            launch.launch(["--x"], num_processes=2, **kwargs)
        assert seen.pop() == first


def test_a_quota_must_fit_the_cores_its_process_may_run_on():
    """`--cpu_quota=2,0.5` under the default `fit` pinned process 0 to one core (it ran at 1
    core, a 2:1 cluster for the 4:1 asked); processes sharing cores could be promised more
    than the cores hold. Both are one line now; `fit` leaves unpinned a quota its slice
    cannot hold."""
    one = lambda *c: frozenset(c)  # noqa: E731
    four = {0, 1, 2, 3}
    assert cgroups.confine("2,0.5", "fit", 2, four) == ((2.0, 0.5), (one(0, 1), one(2, 3)))
    assert cgroups.confine("3,0.5", "fit", 2, four) == ((3.0, 0.5), ())  # unpinned, 3.5 of 4
    assert cgroups.confine((1.5, 0.5), "0-1,1", 2, four)[1] == (one(0, 1), one(1))
    assert cgroups.confine(None, "fit", 2, four) == ((), (one(0, 1), one(2, 3)))
    for quotas, cpus, message in [
        ("2,0.5", "0,1", "gives process 0 2 cores in all, but they may run only on the 1"),
        ("1,1", "0,0", r"gives processes 0, 1 2 cores in all, .* only on the 1 core\(s\) \[0\]"),
        ((1.5, 1.0), "0-1,1", r"processes 0, 1 2.5 cores in all, .* 2 core\(s\) \[0, 1\]"),
        ("2,2", "0-1,1-2", r"processes 0, 1 4 cores in all, .* 3 core\(s\) \[0, 1, 2\]"),
        ("3,1.5", "fit", "gives processes 0, 1 4.5 cores in all, .* on the 4 core"),
        ("", "fit", "takes numbers separated by commas, got ''"),  # --cpu_quota=$UNSET
        ((1.0,), "none", "gives 1 quotas for 2 processes"),
        ((1.0, 5.0), "none", r"5.0 is outside \(0, 4\]"),
    ]:
        with pytest.raises(ValueError, match=message):
            cgroups.confine(quotas, cpus, 2, four)
    with pytest.raises(ValueError, match="gives 1 entries for 2 processes"):
        cgroups.confine(None, (one(0),), 2, four)


@pytest.mark.parametrize(
    "option, message",
    [("--cpu_quota=", "numbers separated by commas"), ("--cpus=", "gives 1 entries")],
)
def test_an_empty_quota_or_core_list_is_refused_not_dropped(option, message, capsys):
    """`--cpu_quota=$Q` with Q unset ran without quotas; `--cpus=` crashed in launch()."""
    with pytest.raises(SystemExit):
        launch.parse(["--num_processes=2", option, "--", "--x"])
    assert message in capsys.readouterr().err


def test_launch_from_python_checks_its_quotas_before_making_anything(tmp_path, monkeypatch):
    """launch(cpu_quota=(1.0,)) for 2 processes started process 0, then an IndexError."""
    monkeypatch.setattr(cgroups, "ROOT", str(v1_root(tmp_path)))
    monkeypatch.setattr(launch, "process_command", lambda *a, **k: pytest.fail("started"))
    for quota, message in [((1.0,), "gives 1 quotas"), ((1.0, 1e-6), "below 0.001 of a core")]:
        with pytest.raises(ValueError, match=message):
            launch.launch(["--x"], num_processes=2, cpu_quota=quota, cpus="none")
    assert entries(tmp_path / "cpu") == ["cpu.cfs_period_us", "cpu.cfs_quota_us"]


def test_a_group_that_fails_half_way_leaves_nothing_and_a_second_launch_is_named(tmp_path):
    root = v1_root(tmp_path)
    with pytest.raises(ValueError, match="must be positive"):
        cgroups.create([1.0, 0.0], root=root)
    assert entries(tmp_path / "cpu") == ["cpu.cfs_period_us", "cpu.cfs_quota_us"]
    groups = cgroups.create([1.0, 0.5], root=root)
    with pytest.raises(cgroups.CgroupError, match="an earlier launch from this process left"):
        cgroups.create([1.0, 0.5], root=root)
    cgroups.release(groups)
    assert entries(tmp_path / "cpu") == ["cpu.cfs_period_us", "cpu.cfs_quota_us"]
