"""Asynchronous training (parameter-server semantics, docs/async.md): its loop and executors."""
