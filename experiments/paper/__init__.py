"""The paper's experiments side by side with ours: ablation configs, the driver, RESULTS.md.

    python -m experiments.paper.reproduce [--small] [--workdir runs/paper]

See docs/RESULTS.md (generated) and experiments/paper/reproduce.py.
"""
