"""Which code a generated document comes from: the commit, whether the tree was dirty, when.

Every generated document (RESULTS.md, BENCHMARKS.md) states these in its first lines, so a
reader can tell a stale document from a current one (issue 28, point 1).
"""

from __future__ import annotations

import datetime
import os
import subprocess

from experiments.paper.fmt import REPO

PIN = "OMNILEARN_STAMP_PIN"  # 'abc1234:clean' or 'abc1234:dirty', set by reproduce.py


def _git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def commit() -> tuple[str, bool]:
    """(short HEAD commit, whether tracked files differ from it); ('', False) outside git.
    Under `make report` the commit and state pinned at its start (PIN): what its parts write
    into docs/ would otherwise make every later part's tree dirty."""
    pinned = os.environ.get(PIN, "")
    if pinned:
        head, _, state = pinned.partition(":")
        return head, state == "dirty"
    head = _git("rev-parse", "--short", "HEAD")
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no")) if head else False
    return head, dirty


def file_commit(path: str) -> tuple[str, str]:
    """(short commit, its date YYYY-MM-DD) that last changed `path`; ('', '') if untracked."""
    out = _git("log", "-1", "--format=%h %cs", "--", path)
    return tuple(out.split()) if out else ("", "")  # type: ignore[return-value]


def pin() -> None:
    """Pins this process's and its children's stamps to the tree as it is now (see commit)."""
    head, dirty = commit()
    os.environ[PIN] = f"{head}:{'dirty' if dirty else 'clean'}"


def changed_since(path: str) -> bool:
    """Whether `path` differs from its last commit (a rerun measured it anew)."""
    return bool(_git("status", "--porcelain", "--", path))


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def stamp() -> dict:
    head, dirty = commit()
    return {"commit": head, "dirty": dirty, "generated": now()}


def line(s: dict) -> str:
    """'commit `abc1234` (dirty: ...) on 2026-12-01 15:00 UTC', for a document's head."""
    if not s.get("commit"):
        return f"outside a git checkout, on {s['generated']}"
    dirty = " (dirty: the tree had uncommitted changes to tracked files)" if s.get("dirty") else ""
    return f"commit `{s['commit']}`{dirty}, on {s['generated']}"
