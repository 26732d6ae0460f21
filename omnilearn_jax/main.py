"""Command line: python -m omnilearn_jax.main --config=configs/NAME.py[:ARG] --workdir=DIR.

Flags live here and nowhere else; everything else takes the config.
"""

from __future__ import annotations

import jax
from absl import app, flags, logging
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file (configs/NAME.py[:ARG]).")
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory for the run store.")
flags.mark_flags_as_required(["config", "workdir"])


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
    app.run(main)
