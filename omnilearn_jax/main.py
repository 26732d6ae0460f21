"""Trains one run: python -m omnilearn_jax.main --config=configs/NAME.py[:ARG] --workdir=DIR
[--config.KEY=VALUE ...] [--verbose]. Exit status: 0 done, 2 a user error (one line), 130/143
stopped by Ctrl-C/SIGTERM (the same command resumes), 1 anything else. The code is
`omnilearn_jax.run.main`; every config key is in omnilearn_jax/config/schema.py."""

import sys

if __name__ == "__main__":
    from absl import flags

    from omnilearn_jax.run import main

    flags.adopt_module_key_flags(main)  # --help lists --config, --workdir and --verbose
    sys.exit(main.run(sys.argv))
