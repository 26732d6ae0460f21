"""OmniLearn-JAX: data-parallel training with per-worker batch-size control."""
