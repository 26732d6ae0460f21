"""The published figures we compare against, with where they come from. Nothing here is
ours: every number of our own in RESULTS.md is computed from the run directories."""

OMNILEARN = "Tyagi & Sharma, OmniLearn, IEEE TPDS 2025 (arXiv 2503.17469)"
ACSOS = (
    "Tyagi & Sharma, Taming Resource Heterogeneity in Distributed ML Training with Dynamic "
    "Batching, ACSOS 2020"
)

# OmniLearn: training time against uniform batching, over its models and HL levels.
BSP_REDUCTION = (0.14, 0.85)
# OmniLearn: asynchronous training, accuracy gain at equal time (up to).
ASYNC_GAIN = 0.069
# ACSOS'20: ResNet on 3 CPU workers, speed-up over uniform batching by H-level.
ACSOS_SPEEDUP = {2: 2.0, 10: 2.4}
# Both papers' set-up that ours follows: 4 workers, B = 128 (32 a worker), bounds 16..96.
SETUP = "4 workers, B = 128, b_min 16, b_max 96, HL tables 12/12/12/12 .. 6/6/4/32 cores"
