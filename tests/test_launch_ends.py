"""How a launch ends (run/launch.py) when its own reader goes away, or signals keep coming
while its processes stop."""

import subprocess
import sys

import pytest

# A launcher whose processes each print far more than a pipe holds (about 1 MB).
SCRIPT = """
import sys
from omnilearn_jax.run import launch
CHILD = "for i in range(20000): print('line', i, 'x' * 40)"
launch.process_command = lambda args, **_: [sys.executable, "-c", CHILD]
sys.exit(launch.main(["--num_processes=2", "--cpus=none", "--", "--x"]))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the launcher's process handling is Linux's")
def test_a_closed_stdout_does_not_hang_the_run():
    # `python -m omnilearn_jax.launch ... | head -3`: the reader closes the pipe after three
    # lines. The relaying threads died on the closed stdout, nobody drained the processes'
    # pipes, and each blocked on a full one for good.
    proc = subprocess.Popen(
        [sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines = [proc.stdout.readline() for _ in range(3)]
    proc.stdout.close()
    try:
        code = proc.wait(timeout=120)  # 1-2 s when it works; a hang is forever
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        pytest.fail("the launcher hung after its stdout was closed")
    assert lines[0].startswith("[launch] started process")
    assert code == 0, proc.stderr.read()[-2000:]


# Processes that ignore SIGINT and SIGTERM, in quota groups that are stand-ins (no cgroups
# needed): three SIGTERMs reach the launcher a second apart once both have started.
SIGNALS = """
import os, signal, sys, threading, time
from omnilearn_jax.run import cgroups, launch
CHILD = "import signal, time; [signal.signal(s, signal.SIG_IGN) for s in (2, 15)]; time.sleep(60)"
launch.process_command = lambda args, **_: [sys.executable, "-c", CHILD]
cgroups.create = lambda quotas, cpus=(): ["g0", "g1"]
cgroups.release = lambda groups: print("released", groups, flush=True)
cgroups.quota_env = lambda quotas, i: {}
launch._enter = lambda group, cores: (lambda: None)
say = launch._say

def signals():
    for _ in range(3):
        time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

def _say(lock, message):
    say(lock, message)
    if "started process 1" in message:
        threading.Thread(target=signals, daemon=True).start()

launch._say = _say
start = time.monotonic()
try:
    code = launch.launch(["--x"], num_processes=2, grace=30, cpu_quota=(0.5, 0.5), cpus="none")
except KeyboardInterrupt:
    code = "again"
print("code", code, "seconds", round(time.monotonic() - start), flush=True)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the launcher's process handling is Linux's")
def test_signals_while_stopping_still_release_the_groups():
    # The first signal sends each process a SIGINT and waits (`grace`), the second stops them
    # (SIGTERM, then SIGKILL after `grace`); a third during that raised out of `stop`, so the
    # quota groups were never released. Now it kills the processes at once.
    out = subprocess.run(
        [sys.executable, "-c", SIGNALS], capture_output=True, text=True, timeout=240
    )
    assert "released ['g0', 'g1']" in out.stdout, out.stdout + out.stderr[-2000:]
    seconds = int(out.stdout.split("seconds")[1])
    assert seconds < 30, out.stdout  # killed at the third signal, not after the 30 s grace


def test_a_process_that_cannot_be_confined_is_one_line(monkeypatch, capsys):
    # Joining a quota group fails before exec for a launcher under a real-time policy (chrt):
    # the child's exception was a bare "SubprocessError: Exception occurred in preexec_fn".
    from omnilearn_jax.run import launch

    def refused() -> None:
        raise OSError(22, "Invalid argument")

    monkeypatch.setattr(launch, "_enter", lambda group, cores: refused)
    assert launch.main(["--num_processes=2", "--cpus=none", "--", "--x"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "process 0 could not join its quota group" in err[0], err


def test_core_sets_from_python_are_checked_as_the_text_is():
    from omnilearn_jax.run import cgroups

    # launch(cpus=(frozenset({7}), ...)) on 2 cores failed in each child's preexec_fn.
    with pytest.raises(ValueError, match=r"process 0 the cores \[7\], not within the cores"):
        cgroups.confine((0.5, 0.25), (frozenset({7}), frozenset({0})), 2, {0, 1})
    with pytest.raises(ValueError, match=r"process 1 the cores \[\], not within"):
        cgroups.confine(None, (frozenset({0}), frozenset()), 2, {0, 1})
    ok = cgroups.confine((0.5, 0.25), (frozenset({1}), frozenset({0})), 2, {0, 1})
    assert ok == ((0.5, 0.25), (frozenset({1}), frozenset({0})))
