"""Datasets by name, the deterministic global-batch sampler, and the offline text corpus."""
