"""Async across processes (asp/remote.py): a parameter server in process 0 and worker k in
process k, talking over sockets."""

import json
import subprocess
import sys
import threading
import time
from multiprocessing import Pipe

import pytest

from omnilearn_jax.asp.loop import AsyncLoop
from omnilearn_jax.asp.remote import RemoteServer, Reply
from omnilearn_jax.engine.stopwatch import Stopwatch
from omnilearn_jax.run.train import Trainer
from tests.test_multiprocess import ROOT, run_launched
from tests.test_train import FEW_BUCKETS, smoke_config

# Buckets of 8 and 64 rows (FEW_BUCKETS, tests/test_train.py): half the programs each process
# compiles. No num_devices: each process has W + 1 devices (one spare for decisions), and
# the W in use are the default (it had stopped with "num_workers=2 on 3 devices").
TWO = ("--config.mode=asp", "--config.num_workers=2", f"--config.bucket_ratio={FEW_BUCKETS}")
ALONE = ("--config.asp.server_process=True",)  # the server in a process of its own


def _records(workdir) -> list[tuple]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    return [(r["step"], r["worker"], r["staleness"], r["loss"]) for r in rows if "worker" in r]


def test_two_processes_give_the_one_process_run_to_the_last_bit(tmp_path):
    """On the virtual clock the schedule is the cost model's, so worker 1 computing in a
    process of its own must give exactly the updates of the single-process event-by-event
    run: the same worker order, staleness and losses, and the same evaluated accuracy. Each
    two-process run here dies at update 12 and resumes from its checkpoint at update 8, so
    its first 12 updates come from the run that died and the rest from the resumed one: with
    the server in process 0 beside worker 0 (worker 1's push in flight restored on process
    0), and with the server in a process of its own (asp.server_process: worker k in process
    k + 1; both workers' pushes in flight restored remote)."""
    config = smoke_config(few_buckets=True)
    config.mode, config.num_workers, config.num_devices = "asp", 2, 2
    config.train.num_steps, config.train.save_params = 16, True
    AsyncLoop(Trainer(config, str(tmp_path / "one")), batched=False).run()
    one = _records(tmp_path / "one")
    assert len(one) == 16 and {w for _, w, _, _ in one} == {0, 1}
    assert one[-1][3] < one[0][3] - 0.2  # it trained, so equal losses mean something
    expected = json.loads((tmp_path / "one" / "summary.json").read_text())
    for name, processes, extra in (("broken", 2, ()), ("broken_alone", 3, ALONE)):
        broken = tmp_path / name
        args = (*TWO, "--config.train.num_steps=16", "--config.train.checkpoint_every=8")
        cmd = [sys.executable, "-m", "omnilearn_jax.launch", f"--num_processes={processes}"]
        cmd += ["--", "--config=configs/smoke.py", f"--workdir={broken}", *args, *extra]
        crashed = subprocess.run([*cmd, "--config.faults.crash_step=12"], cwd=ROOT,
                                 capture_output=True, text=True, timeout=300)  # fmt: skip
        assert crashed.returncode != 0 and "planted crash after step 12" in crashed.stdout
        # The start line counts the processes (it said "1 process(es)", JAX's count in each)
        layout = (
            "(3 process(es)), B=64, shard_map, controller static; asynchronous, staleness bound "
            "-1; workers 0-1 in processes of their own, the server in process 0 alone"
            if extra
            else "(2 process(es)), B=64, shard_map, controller static; asynchronous, staleness "
            "bound -1; worker 1 in a process of its own"  # it said "workers 1-1"
        )
        assert layout in crashed.stdout, crashed.stdout[-3000:]
        resumed = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stdout[-3000:]
        assert "resumed at update 8" in resumed.stdout
        assert extra or "[p1] worker 1: served" in resumed.stdout  # computed in process 1
        assert _records(broken) == one, name  # losses compared as floats, to the last bit
        summary = json.loads((broken / "summary.json").read_text())
        assert summary["final_eval_accuracy"] == expected["final_eval_accuracy"], name
        assert summary["updates_per_worker"] == expected["updates_per_worker"] == [8, 8], name
    # The same command once more: the run is complete. The server returned without listening
    # and worker 1 tried to connect for 600 s, the launcher waiting on it.
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "is already complete (16 steps)" in again.stdout, again.stdout[-3000:]
    assert "[p2] worker 1: served 0 gradients" in again.stdout, again.stdout[-3000:]
    assert json.loads((broken / "summary.json").read_text()) == summary


def test_a_worker_process_that_dies_fails_its_push_not_the_wait():
    """A push in flight from a process that goes away raises where it is read; the server
    does not wait for it for ever."""
    server = RemoteServer.__new__(RemoteServer)  # only its reader is under test
    reply = Reply()
    server.replies = {1: reply}
    here, there = Pipe()
    reader = threading.Thread(target=server._read, args=(1, here))
    reader.start()
    there.close()
    reader.join(5)
    assert not reader.is_alive()
    with pytest.raises(RuntimeError, match="worker 1's process went away"):
        reply.block_until_ready()


def test_a_remote_workers_time_runs_from_the_send_to_the_arrival_of_its_push():
    stopwatch, reply = Stopwatch(), Reply()
    stopwatch.start(1)
    future = stopwatch.stop_when_ready(1, reply)
    time.sleep(0.05)
    assert not future.done() and 0.04 < stopwatch.elapsed(1) < 1.0
    reply.value = ("push", "loss", 8)
    reply.arrived.set()
    assert 0.05 <= future.result(timeout=5) < 1.0
    stopwatch.close()


def test_closing_the_stopwatch_waits_for_a_launch_still_computing():
    """The last push of an async run may still be computing when the run ends: the waiter
    timing it must have ended when `close` returns, not return from its wait into a Python
    that is shutting down (which aborted about 1 process in 15 across processes)."""

    class Slow:  # a launch's output, ready after 0.2 s
        def block_until_ready(self):
            time.sleep(0.2)

    stopwatch = Stopwatch()
    stopwatch.start(0)
    future = stopwatch.stop_when_ready(0, Slow())
    (waiter,) = stopwatch.threads
    stopwatch.close()
    assert not waiter.is_alive() and future.done() and future.result() >= 0.2


def test_async_across_processes_needs_one_worker_a_process():
    from omnilearn_jax.config import checks

    config = smoke_config()
    config.mode, config.num_workers = "asp", 2
    config.distributed.enabled, config.distributed.num_processes = True, 2
    with pytest.raises(ValueError, match="needs distributed.coordinator_address=HOST:PORT"):
        checks.check_for_devices(config, 2, 1)
    config.distributed.coordinator_address = "127.0.0.1:1234"
    checks.check_for_devices(config, 2, 1)
    config.distributed.num_processes = 3
    with pytest.raises(ValueError, match="runs one worker a process: got 3 processes for num"):
        checks.check_for_devices(config, 2, 1)
    config.asp.server_process = True  # the server in one more process
    checks.check_for_devices(config, 2, 1)
    config.distributed.num_processes = 2
    with pytest.raises(ValueError, match="and the server in one more .* --num_processes=3$"):
        checks.check_for_devices(config, 2, 1)
    config.distributed.enabled = False
    with pytest.raises(ValueError, match="server_process=True gives the server a process"):
        checks.check_for_devices(config, 2, 1)


def test_each_process_of_an_async_run_across_processes_has_a_spare_device():
    """W + 1 CPU devices a process, the spare one free for the controller's decisions (on a
    mesh device they queued behind the server's update); any other run keeps cpu_devices."""
    from omnilearn_jax.run import distributed

    config = smoke_config(few_buckets=True)
    config.mode, config.num_workers, config.num_devices = "asp", 2, 2
    assert distributed.cpu_devices(config) == config.cpu_devices == 8
    config.distributed.enabled, config.distributed.num_processes = True, 2
    assert distributed.cpu_devices(config) == 3
    config.asp.server_process, config.distributed.num_processes = True, 3
    assert distributed.cpu_devices(config) == 3
    config.mode = "bsp"
    assert distributed.cpu_devices(config) == 8


def test_a_remote_push_is_applied_off_the_devices_workers_compute_on(tmp_path):
    """Process 0 applies a remote worker's push (and the controller decides) on its spare
    device, where no gradient is queued: on device 0 an update waited for worker 0's
    gradient in flight there (XLA runs a device's programs in order). A local worker's push
    is applied on its own device, as in one process."""
    config = smoke_config(few_buckets=True)
    config.mode, config.num_workers, config.num_devices = "asp", 2, 2
    config.distributed.enabled, config.distributed.num_processes = True, 2
    config.distributed.coordinator_address = "127.0.0.1:1"
    trainer = Trainer(config, str(tmp_path))
    server = RemoteServer(trainer, 0.0)
    computing = {trainer.engine.worker_device(k) for k in range(2)}
    assert server.applies_on(0) == trainer.engine.worker_device(0)
    assert server.applies_on(1) == trainer.engine.host and server.applies_on(1) not in computing
    config.asp.server_process, config.distributed.num_processes = True, 3
    alone = RemoteServer(Trainer(config, str(tmp_path / "alone")), 0.0)
    assert all(alone.applies_on(k) not in computing for k in range(2))


def test_on_the_wall_clock_the_server_applies_pushes_as_they_arrive(tmp_path):
    """A real server: worker 1 is 4x slower (an injected wait of 0.2 ms a row at speed 1/4,
    on top of its compute), so worker 0 pushes about 4x as often, never waiting for it, and
    the clock is the seconds since the first start, not the charged compute alone (which
    counted 41-46% of the steps' wall time here: the server's own work was missing)."""
    run_launched(
        tmp_path, *TWO, "--config.clock=wall", "--config.train.num_steps=60",
        "--config.hetero.name=cores", "--config.hetero.cores=(1.0,0.25)",
        "--config.hetero.inject=0.0002", "--config.train.eval_every=60",
        "--config.train.checkpoint_every=0",  # steps_wall_time leaves periodic saves out
    )  # fmt: skip
    summary = json.loads((tmp_path / "summary.json").read_text())
    fast, slow = summary["updates_per_worker"]
    assert fast + slow == 60 and fast >= 2.5 * slow, (fast, slow)
    records = _records(tmp_path)
    times = [json.loads(line)["time"] for line in (tmp_path / "metrics.jsonl").read_text()
             .splitlines() if '"worker"' in line]  # fmt: skip
    assert len(records) == 60 and times == sorted(times)  # arrival order, one clock
    # the clock is real seconds: the last update lands at the end of the steps' wall time
    assert 0.9 * summary["steps_wall_time"] < times[-1] <= summary["steps_wall_time"]


def test_the_connection_key_is_the_runs_secret_and_a_bare_remote_address_is_warned(capsys):
    """Messages are pickles, so the key is what keeps others out: the launcher's secret
    (KEY_ENV, drawn a launch) where set; the address alone (no secret) was the key before."""
    from omnilearn_jax.asp.remote import address
    from omnilearn_jax.run.launch import KEY_ENV

    config = smoke_config()
    config.distributed.coordinator_address = "10.0.0.5:4000"
    assert address(config, {KEY_ENV: "s3cret"}) == (("10.0.0.5", 4000), b"s3cret")
    assert capsys.readouterr().err == ""
    assert address(config, {}) == (("10.0.0.5", 4000), b"10.0.0.5:4000")
    assert f"warning: {KEY_ENV} is not set: the async run's socket at 10.0.0.5:4000" in (
        capsys.readouterr().err
    )
    config.distributed.coordinator_address = "127.0.0.1:4000"  # this machine: no warning
    assert address(config, {})[1] == b"127.0.0.1:4000" and capsys.readouterr().err == ""


def test_a_worker_process_given_another_config_is_refused_by_the_server():
    """Worker processes build their own data and optimiser and are sent row indices only: one
    given another weight decay or data seed sent wrong gradients without a word. Its hello
    carries its config, which the server compares with its own (a process's own keys
    aside)."""
    from configs import smoke
    from omnilearn_jax.asp import remote
    from omnilearn_jax.run.loop import as_stored

    server = smoke.get_config()
    worker = smoke.get_config()
    worker.distributed.process_id = 2  # its own: not compared
    remote.check_same_config(server, 1, as_stored(worker))
    remote.check_same_config(server, 1, None)  # a hello without one (an older worker)
    worker.optimizer.weight_decay = 0.5
    with pytest.raises(ValueError, match=r"worker 1's process was given another config"):
        remote.check_same_config(server, 1, as_stored(worker))


def test_sigint_is_the_servers_so_it_saves_with_the_pushes_in_flight(tmp_path):
    """The launcher sends SIGINT to every process; a worker process that died of it before
    the server's save failed that save (RuntimeError: worker 1's process went away; in about
    half the tries no summary at all). Here worker 1's process is sent SIGINT alone first: it
    keeps serving; then the launcher's Ctrl-C stops the run with a save at the update reached."""
    import os
    import signal

    from tests.test_multiprocess import Output, alive, long_run_args

    cmd = [sys.executable, "-m", "omnilearn_jax.launch", "--num_processes=2", "--"]
    proc = subprocess.Popen(
        [*cmd, *long_run_args(tmp_path), *TWO],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    out = Output(proc)
    try:
        worker = int(out.wait_for("[launch] started process 1 pid", 30).split()[-1])
        out.wait_for("[p1] worker 1: compiled, serving", 180)
        time.sleep(1.0)  # updates under way
        os.kill(worker, signal.SIGINT)
        time.sleep(1.0)
        assert alive(worker), out.text()[-3000:]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, out.text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert (summary["status"], summary["error"]) == ("interrupted", "Interrupted: SIGINT")
    assert summary["last_checkpoint"] == summary["steps"] > 0, summary  # saved where it stopped
