"""`python -m omnilearn_jax.main` for tests, each command in a child forked from one process.

A command line in a fresh interpreter pays Python's and JAX's import (1.1-1.5 CPU-s on the
2-core development machine) before it reads its first flag. Here one server process per test worker
imports the command line once, without starting a JAX backend (no thread runs yet, so forking
is safe), and forks a child per command: the child takes the command's environment, working
folder and argv, sends its stdout and stderr to files, and runs `omnilearn_jax.run.main.run`,
as `python -m omnilearn_jax.main` does (its exit status is the child's). Its JAX backend,
devices and flags are made in the child, from that environment, as in a fresh process.

Python reads its `PYTHON*` variables when it starts and JAX its `JAX_*` ones when it is
imported: a command whose such variables differ from the server's is exec'd as a fresh
interpreter by its child instead. What a fork cannot see is the interpreter's own start (an
error at import time): each file that uses this keeps one command in a fresh process
(`fresh=True`).
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 300  # seconds a command may take (the child is killed by SIGALRM after it)
_server: subprocess.Popen | None = None


def main(argv: list[str], env: dict[str, str], fresh: bool = False, timeout: int = TIMEOUT):
    """Runs `python -m omnilearn_jax.main *argv` in ROOT with `env`; a CompletedProcess."""
    cmd = [sys.executable, "-m", "omnilearn_jax.main", *argv]
    if fresh:
        return subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    with tempfile.TemporaryDirectory() as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        argv0 = os.path.join(ROOT, "omnilearn_jax", "main.py")
        request = dict(
            argv=[argv0, *argv], env=dict(env), cwd=ROOT, out=out, err=err, timeout=timeout
        )
        server = _started()
        server.stdin.write(json.dumps(request) + "\n")
        server.stdin.flush()
        reply = server.stdout.readline()
        if not reply:
            raise RuntimeError("the command-line server ended")
        with open(out) as f_out, open(err) as f_err:
            stdout, stderr = f_out.read(), f_err.read()
    return subprocess.CompletedProcess(cmd, json.loads(reply)["returncode"], stdout, stderr)


def _started() -> subprocess.Popen:
    global _server
    if _server is None or _server.poll() is not None:
        _server = subprocess.Popen(
            [sys.executable, "-m", "tests.cli"],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        atexit.register(_server.kill)
    return _server


def _child(request: dict) -> int:
    """Runs in the forked child: the command's environment, folder and output, then `run`."""
    import signal
    import traceback

    signal.alarm(request["timeout"])  # SIGALRM's default action ends a hung command
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    for fd, path in ((1, request["out"]), (2, request["err"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    sys.argv = list(request["argv"])
    if _read_at_start(request["env"]) != _read_at_start(_IMPORTED_WITH):
        os.execve(sys.executable, [sys.executable, "-m", "omnilearn_jax.main", *sys.argv[1:]],
                  request["env"])  # fmt: skip
    try:
        from omnilearn_jax.run.main import run

        code = run(sys.argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int | None):
            print(e.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def _read_at_start(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(("JAX_", "PYTHON"))}


_IMPORTED_WITH: dict[str, str] = {}


def serve() -> None:
    """Reads one JSON request a line, forks a child for it, answers its exit status."""
    _IMPORTED_WITH.update(os.environ)
    import omnilearn_jax.run.job  # noqa: F401  (the imports every child shares)
    from omnilearn_jax.run.main import _backends_started

    assert not _backends_started(), "an import started a JAX backend: forking is unsafe"

    for line in sys.stdin:
        request = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    serve()
