"""Ablation grids: spec (cells), runner (subprocesses), table (results), sweep (W&B export)."""
