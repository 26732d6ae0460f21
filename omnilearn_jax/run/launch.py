"""Runs one training job as N processes on this machine (a local multi-process run).

    python -m omnilearn_jax.launch --num_processes=2 [--devices_per_process=4] -- \\
        --config=configs/smoke.py --workdir=runs/mp

starts N copies of `python -m omnilearn_jax.main <args after -->` that join one JAX run over
a free localhost port, each with `devices_per_process` CPU devices. Their output is streamed
line by line with a `[p<i>] ` prefix. If one process fails, the launcher stops the others
(SIGTERM, then SIGKILL after `--grace` seconds), names the one that failed first (not a
peer the runtime aborted because of it), marks the run
store's summary.json `status: failed` and exits non-zero; it exits 0 only if every process
does. A terminal's Ctrl-C or hang-up reaches the launcher alone (each process has a process
group of its own); on Ctrl-C, SIGTERM or SIGHUP it sends each process one SIGINT, so the run
stops as a signal stops it (`status: interrupted`), and exits 130, 143 or 129. SIGINT is
taken even where the launcher was started with it ignored (a background job of a script).

`--cpu_quota=1.0,0.25` puts each process in a cgroup with that share of a core (a real
heterogeneous cluster on one Linux machine) and `--cpus=0,1` pins them to cores; see
docs/cluster_quotas.md and `omnilearn_jax.run.cgroups`. By default (`--cpus=fit`) the
usable cores are dealt out, each process a slice of its own, as mpirun and SLURM bind ranks,
where there is at least one core a process (XLA sizes a process's threads from its cores, so
two processes then never run more threads than the machine has cores; a 2-process step
measured 0.97x one process's pinned against 2.1x unpinned, docs/multihost.md), and nothing is
pinned where there are fewer or where a quota needs more cores than its slice; a quota that
passes the cores its process may use is refused (`cgroups.confine`); `--cpus=auto` deals
them out in turn even then, and `--cpus=none` pins nothing. By default a process is in its
quota group before it execs; `--quota_from=steps` lets it compile and warm up at full speed
and join its group just before the first step (`cgroups.enter_deferred`), so a tight quota
no longer times out Gloo's rendezvous and every step still runs under it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import queue
import re
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence

from omnilearn_jax.config.args import suggest
from omnilearn_jax.config.errors import EXIT_USER_ERROR
from omnilearn_jax.run import cgroups, cpu_limit
from omnilearn_jax.run.runstore import RunStore, last_checkpoint_step, read_json, whole_records

_FORCE_DEVICES = "--xla_force_host_platform_device_count"
_POLL_SECONDS = 0.1
# How long after the first failure other deaths count as its possible consequences.
_SETTLE_SECONDS = 1.0
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
# Gloo prints one such line per device and collective group; they say nothing once a run
# works and bury the training log (`--show_gloo` keeps them).
_GLOO_CHATTER = re.compile(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks")


# The async connection's secret (asp/remote.py): drawn once a launch, the same in every process.
KEY_ENV = "OMNILEARN_ASP_KEY"


def free_port() -> int:
    """A port that was free a moment ago (the coordinator binds it a second later; the
    race is harmless on a machine that is not opening ports by the hundred)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_free(port: int) -> bool:
    """Whether the coordinator could bind `port` on this machine now (a port an earlier
    run's connections left in TIME_WAIT counts as free, as it does for the coordinator)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def child_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of one process: the caller's, minus the XLA flag that fixes the CPU
    device count (main.py sets the count from `cpu_devices`, and the two would disagree),
    on JAX's CPU backend (its devices are the `cpu_devices` the launcher counts: on a GPU
    host every process would otherwise claim every GPU), with unbuffered output so lines
    arrive as they are printed."""
    env = dict(os.environ if base is None else base)
    env["JAX_PLATFORMS"] = "cpu"
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(_FORCE_DEVICES)]
    if flags:
        env["XLA_FLAGS"] = " ".join(flags)
    else:
        env.pop("XLA_FLAGS", None)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def sharing(cpus: Sequence[frozenset[int]], num_processes: int) -> list[int]:
    """For each process, how many of the launched processes (itself included) may run on its
    cores: all of them where none is pinned (`cpus` empty), else those whose cores overlap
    its own. A process's host thread pools are sized to its share (`cpu_limit.fair_share`)."""
    if not cpus:
        return [num_processes] * num_processes
    return [sum(bool(mine & theirs) for theirs in cpus) for mine in cpus]


def process_command(
    main_args: list[str], *, port: int, num_processes: int, process_id: int, devices: int
) -> list[str]:
    """The command line of process `process_id`; the launcher's keys come last, so they
    win over the same keys in `main_args`."""
    return [
        sys.executable,
        "-m",
        "omnilearn_jax.main",
        *main_args,
        "--config.distributed.enabled=True",
        f"--config.distributed.coordinator_address=127.0.0.1:{port}",
        f"--config.distributed.num_processes={num_processes}",
        f"--config.distributed.process_id={process_id}",
        f"--config.cpu_devices={devices}",
    ]


def die_with_parent(parent: int) -> None:
    """Runs in each child before exec: on Linux, the kernel sends it SIGKILL if the launcher
    dies, even by SIGKILL (an ablation runner killing a cell), so no process is orphaned
    holding the port and the CPUs. Elsewhere, only a launcher that exits cleanly stops them.
    The ablation runner gives its cells the same (experiments/ablation/runner.py).
    `parent`: the launcher's pid, taken before the fork. A launcher that died between the
    fork and the request never sends the signal: the child, whose parent is then another
    process, kills itself."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)


def _enter(group: cgroups.Group | None, cores: frozenset[int]) -> Callable[[], None]:
    """A child's `preexec_fn`: die with the launcher, join the quota group, take the cores;
    all before exec, so JAX starts confined."""
    parent = os.getpid()

    def enter() -> None:
        die_with_parent(parent)
        if group is not None:
            group.enter()
        elif cores:
            os.sched_setaffinity(0, cores)

    return enter


def _say(lock: threading.Lock, message: str) -> None:
    with lock:  # whole lines only: the reader threads write to the same stdout
        try:
            sys.stdout.write(message if message.endswith("\n") else message + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()


def _silence_stdout() -> None:
    """Whoever read the launcher's output has gone (`... | head`): what follows goes to
    /dev/null, so the reader threads go on draining the processes' pipes. A reader thread that
    died on the closed stdout left its process blocked on a full pipe, and the run hung."""
    with contextlib.suppress(OSError, ValueError):  # no file descriptor (a captured stdout)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _stream(
    index: int, pipe, lock: threading.Lock, show_gloo: bool, errors: set[str] | None = None
) -> None:
    """Relays a process's lines as `[pN] line`; an `error: ` line another process already
    said (a bad config every process reads) is said once, not once a process."""
    for line in pipe:
        if not show_gloo and _GLOO_CHATTER.match(line):
            continue
        if errors is not None and line.startswith("error: "):
            with lock:
                repeated = line in errors
                errors.add(line)
            if repeated:
                continue
        _say(lock, f"[p{index}] {line}")
    pipe.close()


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def stop(procs: list[subprocess.Popen], grace: float) -> None:
    """SIGTERM to every live process, then SIGKILL to those still alive after `grace` s."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def workdir_of(main_args: list[str]) -> str:
    """The `--workdir` given to main.py ('' if none)."""
    for i, arg in enumerate(main_args):
        if arg.startswith("--workdir="):
            return arg.split("=", 1)[1]
        if arg == "--workdir" and i + 1 < len(main_args):
            return main_args[i + 1]
    return ""


def mark_failed(workdir: str, details: dict, status: str = "failed") -> None:
    """Records a failure (or, with `status="interrupted"`, an interruption) in
    WORKDIR/summary.json unless the run had already completed or says so already.

    A surviving process does not get to do this itself: when a peer dies, JAX's distributed
    runtime aborts the survivors from C++ (SIGABRT, no Python exception), and process 0,
    the run store's writer, may be the one that died. Keys the trainer wrote are kept.
    """
    if not workdir or not os.path.isdir(workdir):
        return
    path = os.path.join(workdir, "summary.json")
    summary = {}
    if os.path.exists(path):
        try:
            summary = read_json(path)
        except ValueError:  # torn by hand or a full disk: the failure is still recorded
            summary = {}
    if summary.get("status") == "complete" or summary.get("status") == status == "interrupted":
        return  # process 0 said it was interrupted, with its step and checkpoint
    summary.update(status=status, **{k: v for k, v in details.items() if k not in summary})
    summary.update(progress_on_disk(workdir))  # process 0 may have written only "running"
    store = RunStore(workdir, append=True)  # append: never truncate the metrics written
    store.write_summary(summary)
    store.close()


def progress_on_disk(workdir: str) -> dict:
    """What a run's files say it reached: the last step (or update) with a train record, and
    the newest whole checkpoint, from which a rerun resumes (nothing without metrics)."""
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return {}
    steps = [record["step"] for _, record in whole_records(path) if "loss" in record]
    last = last_checkpoint_step(workdir)
    return {"steps": max(steps, default=0), "last_checkpoint": last, "resume_step": last or 0}


def root_cause(ends: list[tuple[float, int, int]], settle: float = _SETTLE_SECONDS) -> int | None:
    """The process to blame, from `(end time, index, return code)` of the processes that
    have ended, or None if none failed.

    When one process dies, JAX's distributed runtime aborts its peers (SIGABRT) within
    milliseconds, so several failures arrive together and the first failure can land in the
    same poll as its consequences. Among the failures that ended within `settle` s of the
    first one, the earliest that is not SIGABRT is the cause; if all of them are SIGABRT, the
    earliest is. The limit of the rule: a cause that is itself an abort (an XLA check
    failure) followed within the window by a peer's error exit blames the peer.
    """
    failures = sorted((t, i, code) for t, i, code in ends if code != 0)
    if not failures:
        return None
    first = failures[0][0]
    window = [(t, i, code) for t, i, code in failures if t - first <= settle]
    cause = next((f for f in window if f[2] != -signal.SIGABRT), window[0])
    return cause[1]


def interrupted(code: int) -> bool:
    """Whether an exit code is a process's answer to Ctrl-C or SIGTERM (main.py exits 130 or
    143 after it saved and wrote `status: interrupted`), or its death by either signal."""
    return code in (130, 143, -signal.SIGINT, -signal.SIGTERM)


def _watch(index: int, proc: subprocess.Popen, ended: queue.Queue) -> None:
    """Waits for one process and records when it ended: a blocked wait returns as soon as
    the process exits, so the order of the records is the order of the deaths."""
    proc.wait()
    ended.put((time.monotonic(), index, proc.returncode))


def _wait_for_failure(ended: queue.Queue, count: int) -> list[tuple[float, int, int]]:
    """Collects `(time, index, code)` records until all `count` processes have ended or one
    has failed; after a failure, also those that end within the settle window."""
    ends: list[tuple[float, int, int]] = []
    while len(ends) < count:
        try:  # a timeout, so that SIGTERM to the launcher is handled promptly
            ends.append(ended.get(timeout=_POLL_SECONDS))
        except queue.Empty:
            continue
        if ends[-1][2] != 0:
            deadline = ends[-1][0] + _SETTLE_SECONDS
            while len(ends) < count and (left := deadline - time.monotonic()) > 0:
                try:
                    ends.append(ended.get(timeout=left))
                except queue.Empty:
                    break
            break
    return ends


def launch(
    main_args: list[str],
    *,
    num_processes: int,
    devices_per_process: int = 0,
    port: int = 0,
    grace: float = 10.0,
    show_gloo: bool = False,
    cpu_quota: Sequence[float] = (),
    cpus: Sequence[frozenset[int]] | str = "fit",
    quota_from: str = "start",
) -> int:
    """Runs the job; returns 0 if every process succeeded, else a non-zero exit code.
    `cpu_quota` (a share of a core for each process) and `cpus` (the cores of each, or a
    `--cpus` word or list, by default `fit` as on the command line: `cgroups.parse_cpus`)
    confine the processes; a machine where that is impossible raises `cgroups.CgroupError`.
    `quota_from`: `start` (each process is in its group before it execs) or `steps` (it
    joins once warm-up is done, before the first step)."""
    if num_processes < 1:
        raise ValueError(f"num_processes must be at least 1, got {num_processes}")
    if quota_from not in cgroups.QUOTA_FROM:
        raise ValueError(f"quota_from is one of {cgroups.QUOTA_FROM}, got {quota_from!r}")
    cpu_quota, cpus = cgroups.confine(cpu_quota, cpus, num_processes)  # before any group
    devices = devices_per_process or max(8 // num_processes, 1)
    port = port or free_port()
    lock = threading.Lock()
    procs: list[subprocess.Popen] = []
    threads: list[threading.Thread] = []
    # SIGTERM to the launcher (a scheduler cancelling the job) or SIGHUP (its terminal
    # closed) must reach the children too, or they would linger as orphans holding the port
    # and the CPUs, and the quota groups would stay; they stop the run as Ctrl-C does.
    # SIGINT is taken here too, as the trainer takes it: a launcher started with SIGINT
    # ignored (a background job of a script: `kill -INT $!`) ignored it, and the run went on.
    exits = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}
    received: list[int] = []  # the exit code of the signal that stopped the launcher

    def on_signal(number: int, _frame) -> None:
        received.append(exits[number])
        raise KeyboardInterrupt  # stopped as Ctrl-C stops it: each process told once

    previous = {s: signal.signal(s, on_signal) for s in exits}
    groups: list[cgroups.Group] = []
    failed, stopped = None, False  # stopped: Ctrl-C, SIGTERM or SIGHUP reached the launcher
    try:
        if cpu_quota:
            groups = cgroups.create(cpu_quota, cpus=cpus)
        shared = sharing(cpus, num_processes)
        secret = os.environ.get(KEY_ENV) or secrets.token_hex(16)
        for i in range(num_processes):
            cmd = process_command(
                main_args, port=port, num_processes=num_processes, process_id=i, devices=devices
            )
            group = groups[i] if groups else None
            env = child_env()
            env[cpu_limit.SHARED_ENV] = str(shared[i])
            env[KEY_ENV] = secret
            env.update(cgroups.quota_env(cpu_quota, i))
            if group is not None and quota_from == "steps":
                env[cgroups.ENV] = str(group.path)  # joined before the first step
                group = None
            try:
                p = subprocess.Popen(
                    cmd,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    bufsize=1,
                    preexec_fn=_enter(group, cpus[i] if cpus else frozenset()),
                    process_group=0,  # Ctrl-C reaches the launcher alone, which tells each once
                )
            except subprocess.SubprocessError as e:  # raised in `_enter`, in the child
                raise cgroups.CgroupError(
                    f"process {i} could not join its quota group or take its cores before it "
                    f"started ({e}; the kernel refuses a process under a real-time policy, "
                    "chrt, a CFS quota group)"
                ) from e
            procs.append(p)
            _say(lock, f"[launch] started process {i} pid {p.pid}")
        # Readers start after the last fork: preexec_fn is only safe while one thread runs.
        errors: set[str] = set()
        for i, p in enumerate(procs):
            args = (i, p.stdout, lock, show_gloo, errors)
            t = threading.Thread(target=_stream, args=args, daemon=True)
            t.start()
            threads.append(t)
        # One watcher per process: whichever fails first must stop the rest, and the order
        # of the deaths tells the cause from its consequences.
        ended: queue.Queue = queue.Queue()
        for i, p in enumerate(procs):
            threading.Thread(target=_watch, args=(i, p, ended), daemon=True).start()
        failed = root_cause(_wait_for_failure(ended, num_processes))
        if failed is not None and not interrupted(procs[failed].returncode):
            code = procs[failed].returncode
            _say(lock, f"[launch] process {failed} {_describe(code)}; stopping the others")
    except KeyboardInterrupt:
        # Ctrl-C: each process gets one SIGINT and stops as a signal stops a run (a second
        # one would cut its own shutdown short; SIGTERM is taken by JAX's preemption notifier
        # in a multi-process run, so `stop` would have to kill them after `grace`).
        stopped = True
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGINT)
        deadline = time.monotonic() + grace
        for p in procs:
            with contextlib.suppress(subprocess.TimeoutExpired):  # `stop` below
                p.wait(timeout=max(deadline - time.monotonic(), 0.0))
    finally:
        # A further signal while the processes stop kills them at once and raises nothing:
        # raised out of `stop`, it skipped the release and left the quota groups behind.
        def kill_now(number: int, _frame) -> None:
            received.append(exits[number])
            for p in procs:
                if p.poll() is None:
                    p.kill()

        for number in exits:
            signal.signal(number, kill_now)
        try:
            stop(procs, grace)  # also on an exception or SIGTERM; a no-op once all have ended
            for t in threads:
                t.join(timeout=grace)  # drain what the processes printed last
        finally:
            cgroups.release(groups)  # after stop(): a group empties when its process is reaped
            for number, handler in previous.items():
                signal.signal(number, handler)
    if stopped or (failed is not None and interrupted(procs[failed].returncode)):
        # Each process stops at once (a multi-process run cannot checkpoint on a signal that
        # reaches only some processes); process 0 wrote `status: interrupted` if it could.
        details = {"error": "interrupted (SIGINT or SIGTERM)"}
        mark_failed(workdir_of(main_args), details, status="interrupted")
        _say(lock, "[launch] interrupted; run the same command again to resume from the last "
                   "checkpoint")  # fmt: skip
        if received:
            return received[0]
        code = procs[failed].returncode if failed is not None else 130
        return 128 - code if code < 0 else code  # a process's own: 143 for SIGTERM, not 130
    if failed is None:
        _say(lock, f"[launch] all {num_processes} processes finished")
        return 0
    code = procs[failed].returncode
    error = f"process {failed} of {num_processes} {_describe(code)}"
    status = code if code > 0 else 128 - code  # shell convention for a signal: 128 + number
    if code != EXIT_USER_ERROR:  # a user error is said before anything is written (main.py)
        details = {"error": error, "failed_process": failed, "exit_code": status}
        mark_failed(workdir_of(main_args), details)  # the code the launcher exits with
    _say(lock, f"[launch] FAILED: {error}")
    return status


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """Splits `argv` at `--`: launcher options before, main.py's arguments after."""
    cut = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        prog="python -m omnilearn_jax.launch",
        description="Run omnilearn_jax.main as N processes on this machine.",
        epilog="Arguments after -- go to omnilearn_jax.main unchanged.",
    )
    parser.add_argument("--num_processes", type=int, help="processes to run (required)")
    parser.add_argument(
        "--devices_per_process", type=int, default=0, help="CPU devices each (0: 8 // N)"
    )
    parser.add_argument("--port", type=int, default=0, help="coordinator port (0: a free one)")
    parser.add_argument(
        "--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL"
    )
    parser.add_argument("--show_gloo", action="store_true", help="keep Gloo's connection lines")
    parser.add_argument(
        "--cpu_quota", default=None, help="a share of a core for each process, e.g. 1.0,0.25"
    )
    parser.add_argument(
        "--cpus",
        default="fit",
        help="the cores of each process, e.g. 0,1 or 0-1,2; auto: the usable cores dealt "
        "out, each process its own where there are enough; fit (default): as auto where "
        "there is a core a process, else not pinned; none: not pinned",
    )
    parser.add_argument(
        "--quota_from",
        default="start",
        choices=cgroups.QUOTA_FROM,
        help="when --cpu_quota applies: start (before exec, the default) or steps (after "
        "compiling and warm-up, from the first step)",
    )
    args, unknown = parser.parse_known_args(argv[:cut])
    if unknown:  # named first: a misspelt --num_processes was "required" and never named
        flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
        word = unknown[0].split("=", 1)[0]
        hint = suggest(word, flags) if word.startswith("--") else ""
        parser.error(f"unknown launcher argument {unknown[0]!r}{hint} (main.py's go after --)")
    if args.num_processes is None:
        parser.error("--num_processes is required")
    platforms = os.environ.get("JAX_PLATFORMS", "cpu")
    if platforms not in ("", "cpu"):
        parser.error(
            f"JAX_PLATFORMS={platforms}: the launcher runs its processes on CPU devices (each "
            f"would claim every GPU); on GPUs start one process a GPU through your scheduler "
            f"(docs/multihost.md, SLURM), or unset JAX_PLATFORMS"
        )
    for name in ("num_processes", "devices_per_process", "port", "grace"):
        least = 1 if name == "num_processes" else 0
        if getattr(args, name) < least:
            parser.error(f"--{name} must be at least {least}, got {getattr(args, name)}")
    if args.port > 65535:
        parser.error(f"--port must be at most 65535, got {args.port}")
    if args.port and not port_free(args.port):  # the coordinator died of it (SIGSEGV)
        parser.error(f"--port {args.port} is in use on this machine; leave --port out (a free one)")
    try:  # an empty --cpu_quota= (an unset $Q) is an error, not "no quota"
        args.cpu_quota, args.cpus = cgroups.confine(args.cpu_quota, args.cpus, args.num_processes)
    except ValueError as e:
        parser.error(str(e))
    if args.quota_from != "start" and not args.cpu_quota:
        parser.error("--quota_from says when --cpu_quota applies: give --cpu_quota too")
    main_args = argv[cut + 1 :]
    if not main_args:
        parser.error("give main.py's arguments after --, e.g. -- --config=... --workdir=...")
    if given := [a for a in main_args if a.startswith("--config.cpu_devices")]:
        parser.error(  # each process's own count wins over it: it was dropped silently
            f"{given[0]} after --: the launcher gives each process its devices; use "
            f"--devices_per_process instead"
        )
    return args, main_args


def main(argv: list[str] | None = None) -> int:
    args, main_args = parse(sys.argv[1:] if argv is None else argv)
    try:
        return launch(
            main_args,
            num_processes=args.num_processes,
            devices_per_process=args.devices_per_process,
            port=args.port,
            grace=args.grace,
            show_gloo=args.show_gloo,
            cpu_quota=args.cpu_quota,
            cpus=args.cpus,
            quota_from=args.quota_from,
        )
    except cgroups.CgroupError as e:
        print(f"[launch] {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # a second Ctrl-C while the processes were stopping
        print("[launch] interrupted again: the processes were killed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
