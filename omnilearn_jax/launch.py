"""`python -m omnilearn_jax.launch`: a local multi-process run; the code is
`omnilearn_jax.run.launch`."""

import sys

from omnilearn_jax.run.launch import main

if __name__ == "__main__":
    sys.exit(main())
