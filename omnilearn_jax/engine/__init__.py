"""The engine: buckets and blocks, per-device programs, the reduction and the update, timing,
and program sharing."""
