"""Command line: python -m omnilearn_jax.main --config=configs/NAME.py[:ARG] --workdir=DIR.

Flags live here and nowhere else; everything else takes the config. Exit status: 0 done,
2 a user error (one line on stderr; `--verbose` or OMNILEARN_VERBOSE=1 adds the traceback),
130/143 stopped by Ctrl-C/SIGTERM (the run saved a checkpoint; the same command resumes), 1
anything else (a non-finite loss under `train.nan_policy=stop` in one line, too).
"""

from __future__ import annotations

import os
import sys
import traceback

import jax
from absl import app, flags, logging
from ml_collections import config_flags

import controllers
from omnilearn_jax.config import errors
from omnilearn_jax.run import cgroups, interrupt

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (configs/NAME.py[:ARG]).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for the run store.")
_VERBOSE = flags.DEFINE_bool(
    "verbose", False, f"Show the traceback of a user error (or set {errors.VERBOSE_ENV}=1)."
)
flags.mark_flags_as_required(["config", "workdir"])


def import_controller_plugin(argv: list[str]) -> str:
    """Imports the module of `--config.controller.plugin` before the flags are parsed.

    The config file is read while the flags are parsed; importing the plug-in first registers
    its policy, so its own arguments (e.g. `--config.controller.gain=0.3`) are config keys the
    command line can set like any other. Returns the module name ('' when none is given).
    """
    module = (errors.flag_values(argv, "config.controller.plugin") or [""])[-1]
    controllers.load_plugin(module)  # a ValueError names the module it cannot import
    if module and _backends_started():
        raise errors.UserError(
            f"controller.plugin={module} ran a JAX operation when imported; the CPU "
            f"device count and multi-process set-up come later, from the config. Build "
            f"arrays inside the policy's factory or its init/update, not at module level."
        )
    return module


def _backends_started() -> bool:
    """Whether JAX has created its backends (False where this JAX cannot tell)."""
    try:
        from jax._src import xla_bridge
    except ImportError:
        return False
    started = getattr(xla_bridge, "backends_are_initialized", None)
    return bool(started()) if started else False


def parse_flags(argv: list[str]) -> list[str]:
    """absl's flag parsing, with its errors as user errors of one line."""
    try:
        return flags.FLAGS(argv)
    except (flags.Error, KeyError, AttributeError) as e:
        # ml_collections reports an unknown --config.KEY as KeyError/AttributeError (or as
        # an unknown flag); the parsed config file's own keys give the suggestion.
        try:
            config = flags.FLAGS["config"].value
        except Exception:
            config = None
        message = errors.unknown_override(e, argv, config)
        if message is None and not isinstance(e, flags.Error):
            raise
        raise errors.UserError(message or errors.one_line(e)) from e


def check_is_training_config(config) -> None:
    """A config file of another kind (an ablation's, with `base` and `grid`) is one line,
    not an AttributeError on the first section the run reads."""
    if "grid" in config and "base" in config:
        raise errors.UserError(
            f"{flags.FLAGS['config'].serialize().split('=', 1)[-1]} is an ablation (it has "
            f"base and grid): run it with python -m experiments.ablate --config=FILE "
            f"--workdir=DIR (docs/ablations.md)"
        )
    # Every key of the base config the run reads (only cpu_dispatch has a default there):
    # checked for four, a config without `dataset` (or `hetero`, `optimizer`...) was an
    # AttributeError on the first section the run read.
    from omnilearn_jax.config.schema import base_config

    missing = [k for k in base_config() if k != "cpu_dispatch" and k not in config]
    if missing:
        raise errors.UserError(
            f"the config has no {', '.join(missing)}: a training config starts from "
            f"omnilearn_jax.config.schema.base_config() (see configs/default.py)"
        )


def check_workdir(workdir: str) -> None:
    """A workdir that is a file (or under one) is one line, before the data is loaded: it
    had failed at the run store's first write, with a traceback, after the build."""
    path = os.path.abspath(workdir)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    if not os.path.isdir(path):
        where = "is" if path == os.path.abspath(workdir) else f"is under {path},"
        raise errors.UserError(f"--workdir={workdir} {where} a file, not a directory")


def main(argv):
    del argv
    config = _CONFIG.value
    check_is_training_config(config)
    # Every check that needs neither devices nor data, before the first line: a bad value
    # (global_batch_size=0, which the paper configs divide by) is one line of its own, not
    # a traceback or a line announcing a compile that never comes. The trainer checks
    # again against the devices it gets.
    from omnilearn_jax.config.checks import check_config

    check_config(config)
    check_workdir(_WORKDIR.value)
    # The first line comes at once: building the model and compiling take a while. The
    # processes of a launched run other than process 0 print nothing of their own but errors.
    if config.distributed.process_id <= 0:
        print(
            f"starting {config.model.name} on {config.dataset.name}: {config.num_workers} workers, "
            f"B={config.global_batch_size}, {config.train.num_steps} steps, controller "
            f"{config.controller.name}, cluster {config.hetero.name}, {config.clock} clock, "
            f"workdir {_WORKDIR.value}; loading the data, then compiling the model's init, train "
            f"and eval steps (which takes longer than the steps themselves)",
            flush=True,
        )
        quota = os.environ.get(cgroups.QUOTA_ENV)
        if quota and config.clock != "wall":  # the launcher's --cpu_quota changes nothing
            print(
                f"warning: this process runs under a CPU quota of {quota} of a core, but the "
                f"{config.clock} clock models each worker's time and ignores it; set "
                f"--config.clock=wall to measure the quotas",
                file=sys.stderr,
                flush=True,
            )
    logging.set_verbosity(logging.WARNING)  # keep JAX's backend-probing INFO lines quiet
    from omnilearn_jax.run import cpu_limit, distributed

    # Must precede the first JAX operation; it only shapes the CPU backend, so a run on GPU
    # or TPU is unaffected. Async across processes: each process is a JAX program of its own
    # (asp/remote.py); any other multi-process run joins one JAX run.
    across = distributed.async_across(config)
    jax.config.update("jax_num_cpu_devices", distributed.cpu_devices(config))
    # The backends start here, their host threads sized to the CPUs a quota leaves the
    # process (run/cpu_limit.py), not to every core in its mask; at one core's worth of a
    # larger mask, or one device a process of several unpinned, programs run in the calling
    # thread (cpu_limit.dispatch_for; config.cpu_dispatch forces either way).
    joined = bool(config.distributed.enabled) and not across
    processes = int(config.distributed.num_processes) if joined else 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    with cpu_limit.threads_for_limit() as narrowed:
        rule = (narrowed, processes, distributed.cpu_devices(config), cores)
        if cpu_limit.in_caller(config.cpu_dispatch, *rule):
            jax.config.update("jax_cpu_enable_async_dispatch", False)
        if not across:
            distributed.initialize(config.distributed)
        jax.devices()
    from omnilearn_jax.run.job import train_and_evaluate

    train_and_evaluate(config, _WORKDIR.value)
    if across:  # everything is written and closed by now (run store, checkpoints, tracker)
        # An async process across processes skips the interpreter's shutdown: there, about
        # 1 run in 15 aborted after a complete run ("terminate called after throwing an
        # instance of ''": a thread ended by the shutdown inside C++ code; which thread is
        # not found), and the launcher then reported the finished run as failed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def run(argv: list[str]) -> int:
    """The command line; returns the exit status (see the module docstring).

    A process of a run joined over several that stops on anything but success (interrupted,
    failed, its peer dead) leaves at once, without the interpreter's shutdown: there JAX's
    distributed shutdown waits in a barrier for peers that are stopping or gone, so a Ctrl-C
    took the launcher's whole --grace, a SIGINT to one process ended in a SIGABRT 30 s later,
    and the survivors of a dead peer waited out --grace (run store and tracker are closed by
    then: the loop closes them before the error leaves it)."""
    try:
        code = _run(argv)
    except SystemExit as e:  # app.run ends with sys.exit(main()): None is success
        if not _joined():
            raise
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)  # as the interpreter says a sys.exit(message)
        code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    except BaseException:
        if not _joined():
            raise
        traceback.print_exc()
        code = 1
    if code and _joined():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def _joined() -> bool:
    """Whether this process joined a run of several (jax.distributed with peers)."""
    return bool(jax.distributed.is_initialized()) and jax.process_count() > 1


def _run(argv: list[str]) -> int:
    verbose = errors.verbose_requested(argv)
    interrupt.raise_on_signals()  # SIGTERM too stops with a line, not silently
    try:
        errors.check_config_path(argv[1:])
        import_controller_plugin(argv[1:])
        app.run(main, argv=argv, flags_parser=parse_flags)
    except (errors.UserError, *errors.USER_ERRORS) as e:
        code = errors.report(e)
        if verbose:  # the traceback, after the line with its suggestion ("did you mean");
            traceback.print_exc()  # the exit status stays a user error's
        return code
    except interrupt.Interrupted as e:  # the loop has saved and said where it stopped
        if not getattr(e, "told", False) and (line := interrupt.before_steps(argv[1:])):
            print(line)  # stopped while loading or compiling: say so too
        return e.exit_code
    except FloatingPointError as e:  # the loop's NonFiniteLoss: the run store says failed
        if verbose:
            raise
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv))
