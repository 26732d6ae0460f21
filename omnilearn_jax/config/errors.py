"""User errors on the command line: one line on stderr, exit status 2, no traceback.

A user error is bad input that the user fixes by changing the command: a flag that does not
parse, an unknown config key or name, an inconsistent config, a missing or malformed file, a
workdir holding another run. The library raises these as ValueError (FileNotFoundError for a
missing file), each with a message that names the fix; the command line prints that message
as one line. Anything else is a bug and keeps its traceback. `--verbose` or
OMNILEARN_VERBOSE=1 shows the traceback of a user error too.
"""

from __future__ import annotations

import os
import re
import sys

from omnilearn_jax.config.args import suggest

VERBOSE_ENV = "OMNILEARN_VERBOSE"
EXIT_USER_ERROR = 2
USER_ERRORS = (ValueError, FileNotFoundError)

# 'unknown controller 'proportinal'; registered: [...]', 'unknown model 'vit'; valid names: ...'
_UNKNOWN = re.compile(r"unknown (?P<what>[\w.]+(?: [\w.]+)?) '(?P<name>[^']*)'")
_CHOICES = re.compile(r"(?:valid [\w ]+|registered): (?P<names>.*)")
# ml_collections' text for a key that is not in the config: "'num_step'\nDid you mean ...".
_MISSING_KEY = re.compile(
    r"^(?:Unknown command line flag 'config\.|')(?P<key>[^']+)'"
    r'(?:\s*Did you mean "(?P<close>[^"]+)")?'
)


class UserError(Exception):
    """A user error raised by the command line itself (already one line)."""


def verbose_requested(argv: list[str]) -> bool:
    """`--verbose` on the command line or OMNILEARN_VERBOSE set to anything but 0/empty."""
    if os.environ.get(VERBOSE_ENV, "") not in ("", "0"):
        return True
    # absl's true spellings, any case: --verbose=True was taken by absl and missed here
    return any(a.lower() in ("--verbose", "--verbose=true", "--verbose=t", "--verbose=1")
               for a in argv)  # fmt: skip


def with_suggestion(message: str) -> str:
    """Adds "(did you mean 'x'?)" after an unknown name when the message lists the valid ones
    and one of them is close; messages that already suggest, or list nothing, pass as-is."""
    if "did you mean" in message:
        return message
    match = _UNKNOWN.search(message)
    choices = _CHOICES.search(message, match.end()) if match else None
    if not choices:
        return message
    hint = suggest(match["name"], re.findall(r"[\w.+-]+", choices["names"]))
    end = match.end()
    return message[:end] + hint + message[end:] if hint else message


def unknown_override(error: BaseException, argv: list[str], config=None) -> str | None:
    """The message for an unknown `--config.KEY` override (ml_collections raises KeyError or
    AttributeError with a two-line text naming only the last part); None when not that.
    With the parsed `config`, the suggestion is the closest of all its keys."""
    match = _MISSING_KEY.match(_first_arg(error))
    if not match:
        return None
    part = match["key"]
    known = _dotted_keys(config) if config is not None else []
    for arg in argv:
        if not arg.startswith("--config."):
            continue
        key = arg[len("--config.") :].split("=", 1)[0]
        parts = key.split(".")
        if part not in parts and part != key:
            continue
        from omnilearn_jax.config.checks import REMOVED

        if key in REMOVED:  # a key of earlier versions: its replacement, as in a config file
            return f"config key {key!r} was removed: {REMOVED[key]}"
        hint = suggest(key, known)
        if not hint and match["close"]:
            fixed = ".".join(match["close"] if p == part else p for p in parts)
            hint = f" (did you mean {fixed!r}?)"
        message = (
            f"unknown config key {key!r}{hint}; omnilearn_jax/config/schema.py lists every key"
        )
        if key.startswith("controller.") and not hint:
            message += "; a plug-in policy's argument needs its module first: "
            message += "--config.controller.plugin=MODULE"
        return message
    # Set inside a config file (no command-line key names it): the closest name of any
    # section or key of the schema.
    from omnilearn_jax.config.schema import base_config

    names = {n for key in _dotted_keys(base_config()) for n in key.split(".")}
    return f"unknown config key {part!r}{suggest(part, sorted(names))}"


def _dotted_keys(config, prefix: str = "") -> list[str]:
    keys = []
    for key, value in config.items():
        if hasattr(value, "items"):
            keys += _dotted_keys(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def _first_arg(error: BaseException) -> str:
    """The message inside (AttributeError wraps the KeyError, whose str() adds quotes)."""
    arg: object = error
    while isinstance(arg, BaseException):
        arg = arg.args[0] if arg.args else ""
    return str(arg)


def flag_values(argv: list[str], name: str) -> list[str]:
    """The values given to `--name`, as `--name=VALUE` or `--name VALUE` (absl takes both)."""
    values = []
    for i, arg in enumerate(argv):
        if arg.startswith(f"--{name}="):
            values.append(arg.split("=", 1)[1])
        elif arg == f"--{name}" and i + 1 < len(argv):
            values.append(argv[i + 1])
    return values


def check_config_path(argv: list[str]) -> None:
    """A missing --config file, named before absl's lazy loader reports it as a traceback."""
    for value in flag_values(argv, "config"):
        path = value.partition(":")[0]
        if not os.path.isfile(path):
            raise UserError(f"--config: No such file or directory: {path!r}")


def one_line(error: BaseException) -> str:
    """The error's message as one line: the last line of an embedded traceback (absl wraps
    errors of a config file's get_config that way), newlines folded, a suggestion added."""
    text = _first_arg(error) if isinstance(error, KeyError) else str(error)
    if "Traceback (most recent call last)" in text:
        head = text.split("Error whilst parsing config file", 1)[0].strip().rstrip(":")
        last = [line.strip() for line in text.splitlines() if line.strip()][-1]
        last = re.sub(r"^\w+(Error|Exception): ", "", last)
        text = f"{head}: {last}" if head else last
    return with_suggestion(" ".join(part.strip() for part in text.splitlines() if part.strip()))


def report(error: BaseException, prefix: str = "error") -> int:
    """Prints the one line on stderr; returns the exit status for a user error."""
    print(f"{prefix}: {one_line(error)}", file=sys.stderr, flush=True)
    return EXIT_USER_ERROR
