"""`python -m omnilearn_jax.main`: the command line; the code is `omnilearn_jax.run.main`."""

import sys

from omnilearn_jax.run.main import run

if __name__ == "__main__":
    sys.exit(run(sys.argv))
