"""Command line: python -m omnilearn_jax.main --config=configs/NAME.py[:ARG] --workdir=DIR.

Flags live here and nowhere else; everything else takes the config.
"""

from __future__ import annotations

import sys

import jax
from absl import app, flags, logging
from ml_collections import config_flags

import controllers

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (configs/NAME.py[:ARG]).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for the run store.")
flags.mark_flags_as_required(["config", "workdir"])


def import_controller_plugin(argv: list[str]) -> str:
    """Imports the module of `--config.controller.plugin` before the flags are parsed.

    The config file is read while the flags are parsed; importing the plug-in first registers
    its policy, so its own arguments (e.g. `--config.controller.gain=0.3`) are config keys the
    command line can set like any other. Returns the module name ('' when none is given).
    """
    module = ""
    for i, arg in enumerate(argv):
        if arg.startswith("--config.controller.plugin="):
            module = arg.split("=", 1)[1]
        elif arg == "--config.controller.plugin" and i + 1 < len(argv):
            module = argv[i + 1]
    try:
        controllers.load_plugin(module)
    except ValueError as e:
        raise SystemExit(f"error: {e}") from None
    if module and _backends_started():
        raise SystemExit(
            f"error: controller.plugin={module} ran a JAX operation when imported; the CPU "
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


def main(argv):
    del argv
    config = _CONFIG.value
    logging.set_verbosity(logging.WARNING)  # keep JAX's backend-probing INFO lines quiet
    # Must precede the first JAX operation; it only shapes the CPU backend, so a run on GPU
    # or TPU is unaffected.
    jax.config.update("jax_num_cpu_devices", config.cpu_devices)
    from omnilearn_jax import distributed

    distributed.initialize(config.distributed)
    from omnilearn_jax.train import train_and_evaluate

    train_and_evaluate(config, _WORKDIR.value)


if __name__ == "__main__":
    import_controller_plugin(sys.argv[1:])
    app.run(main)
