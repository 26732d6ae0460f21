"""The files a run reads its inputs from (a trace of speeds, a local data set), as SHA-256
digests kept in config.json: the config names a file, not what it held, so a file edited
between a run's sessions would have been read afresh on resume and the resumed run would
have followed another cluster or other data (`loop.check_same_config` refuses it)."""

from __future__ import annotations

import hashlib
import os

FILE_KEYS = ("hetero.path", "dataset.path")


def digests(config) -> list[list[str]]:
    """[config key, sha256 of the file it names] for each of FILE_KEYS naming a file (pairs:
    a config cannot hold dotted keys)."""
    out = []
    for key in FILE_KEYS:
        section, leaf = key.split(".")
        path = str(config[section].get(leaf, "") or "") if section in config else ""
        if path and os.path.isfile(path):
            with open(path, "rb") as f:
                out.append([key, hashlib.file_digest(f, "sha256").hexdigest()])
    return out


def changed(kept: list[list[str]], config) -> str:
    """Which file named by `config` no longer holds what `kept` (config.json's digests)
    says it held when the run started ('' if none; files a run did not digest are not
    compared)."""
    now = dict(digests(config))
    for key, digest in kept:
        if key in now and now[key] != digest:
            section, leaf = key.split(".")
            return (
                f"{key}={config[section][leaf]!r} changed since the run started (sha256 "
                f"{digest[:12]}... then, {now[key][:12]}... now)"
            )
    return ""
