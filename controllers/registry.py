"""Policies are looked up by name: register a factory, make a controller from kwargs or config."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Mapping
from typing import Any

from controllers.base import Controller

Factory = Callable[..., Controller]
_FACTORIES: dict[str, Factory] = {}
_SHARED: dict[tuple, Controller] = {}  # (factory, arguments) -> the policy built from them
KEEP_SHARED = 64

# Said with an unknown policy's name: it may be a plug-in's, not imported.
PLUGIN_HINT = (
    "a plug-in's policy is registered by importing its module: --config.controller.plugin=MODULE"
)
# Keys a config section may hold that are not policy arguments.
_CONFIG_ONLY_KEYS = ("name", "plugin")


class RegistrationError(TypeError, ValueError):
    """A policy that breaks `register`'s rules: a TypeError (the factory's signature is
    wrong) that is also a ValueError, so the command line reports a plug-in's mistake as a
    user error (one line, exit status 2), not as a traceback through its import."""


def register(name: str) -> Callable[[Factory], Factory]:
    """Decorator: `@register("mine")` over `def mine(*, b_min=..., ...) -> Controller`.

    Arguments must be keyword-only so configs can pass them by name, each with a default
    (it becomes its config key's default). Registering the same
    function again (a re-imported plug-in) is allowed; a different one under a taken name is not.
    """

    if not (isinstance(name, str) and name):  # a number broke sorting every name after it
        raise RegistrationError(f"a controller's name must be a non-empty string, got {name!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):  # `named` splits on commas, strips spaces
        raise RegistrationError(
            f"a controller's name holds letters, digits, '_', '.' and '-' only, got {name!r}"
        )

    def decorator(factory: Factory) -> Factory:
        params = inspect.signature(factory).parameters.values()
        reserved = [p.name for p in params if p.name in _CONFIG_ONLY_KEYS]
        if reserved:  # the config section's `name` and `plugin` never reach the factory
            raise RegistrationError(
                f"controller {name!r}: arguments {reserved} are reserved config keys "
                f"(controller.name picks the policy, controller.plugin imports it); rename them"
            )
        positional = [p.name for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
        if positional:
            raise RegistrationError(
                f"controller {name!r}: arguments {positional} must be keyword-only"
            )
        bare = [p.name for p in params if p.default is inspect.Parameter.empty]
        if bare:  # the config section takes every argument's default as its key's value
            raise RegistrationError(f"controller {name!r}: arguments {bare} need a default value")
        unset = [p.name for p in params if p.default is None]
        if unset:  # ml_collections cannot override a None-valued key from the command line
            raise RegistrationError(
                f"controller {name!r}: arguments {unset} default to None, which no command "
                f"line can set (a config key takes its default's type); use '', 0 or () instead"
            )
        old = _FACTORIES.get(name)
        if old is not None and _qualified(old) != _qualified(factory):
            raise ValueError(f"controller name {name!r} is already registered by {_qualified(old)}")
        _FACTORIES[name] = factory
        return factory

    return decorator


def load_plugin(module: str) -> None:
    """Imports a user's policy module, which registers its policies ('' does nothing).

    Import it before the config is built: the config's controller section holds the keyword
    arguments of every registered policy, so the plug-in's own become settable keys.
    """
    if not module:
        return
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        missing = e.name or ""
        if not (module == missing or module.startswith(missing + ".")):
            raise  # the plug-in exists but an import inside it failed: keep its traceback
        raise ValueError(
            f"controller.plugin={module}: cannot import it ({e}); give a module path "
            f"importable from the working directory, e.g. experiments.examples.damped"
        ) from None


def named(text: str) -> list[str]:
    """Policy names from a comma-separated list (a command line's `--controllers`), each
    registered: ValueError for none, an unknown one or one named twice, before any run is
    made (a name given twice ran its whole plan twice, then failed pairing the runs)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError(f"--controllers names none; registered: {list(available())}")
    if twice := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"--controllers names {', '.join(twice)} more than once")
    for name in names:  # the config key's hint: these scripts have no such key
        _lookup(name, hint="a plug-in's policy is registered once its module is imported")
    return names


def available() -> tuple[str, ...]:
    """Registered policy names, sorted."""
    return tuple(sorted(_FACTORIES))


def accepted_kwargs(name: str) -> tuple[str, ...]:
    """The keyword arguments policy `name` takes."""
    return tuple(inspect.signature(_lookup(name)).parameters)


def default_kwargs(name: str) -> dict[str, Any]:
    """Policy `name`'s keyword arguments with their defaults (configs expose them all)."""
    params = inspect.signature(_lookup(name)).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def make(name: str, **kwargs: Any) -> Controller:
    """Builds policy `name`; unknown names and unknown arguments raise, naming what is wrong."""
    factory = _lookup(name)
    unknown = sorted(set(kwargs) - set(accepted_kwargs(name)))
    if unknown:
        raise TypeError(
            f"controller {name!r} got unknown argument(s) {unknown}; "
            f"it accepts {sorted(accepted_kwargs(name))}"
        )
    return factory(**kwargs)


def make_from_config(section: Mapping[str, Any]) -> Controller:
    """Builds the policy named by `section["name"]` from a flat config section.

    One config holds the keys of several policies (so `--config.controller.name=pi` just
    works): keys another registered policy accepts are dropped, keys no policy knows raise.
    `plugin` (the module the trainer imports to register user policies) is ignored here.
    """
    name, kwargs = _policy_arguments(section)
    return make(name, **kwargs)


def shared_from_config(section: Mapping[str, Any]) -> Controller:
    """`make_from_config(section)`, the same object again for the same arguments while the
    policy's factory stays registered (the last KEEP_SHARED kept). A policy is two pure
    functions of its arguments, and jax.jit caches by function: a process that trains
    several runs with one policy (a sweep, a notebook, a test session) then traces and
    compiles each decision once (0.4-0.8 s a run on the 2-core machine). Arguments that
    cannot be hashed build a new policy each time."""
    name, kwargs = _policy_arguments(section)
    key = (_lookup(name), tuple(sorted((k, _typed(v)) for k, v in kwargs.items())))
    try:
        hash(key)
    except TypeError:  # an unhashable value
        return make(name, **kwargs)
    if key not in _SHARED:
        while len(_SHARED) >= KEEP_SHARED:
            del _SHARED[next(iter(_SHARED))]
        _SHARED[key] = make(name, **kwargs)
    return _SHARED[key]


def _policy_arguments(section: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(name, the keyword arguments of that policy) from a flat config section."""
    values = section.to_dict() if hasattr(section, "to_dict") else dict(section)
    if "name" not in values:
        raise ValueError("controller config needs a 'name' key")
    name = values["name"]
    own = set(accepted_kwargs(name))
    known = {key for other in _FACTORIES for key in accepted_kwargs(other)}
    kwargs = {}
    for key, value in values.items():
        if key in _CONFIG_ONLY_KEYS or (key not in own and key in known):
            continue
        if key not in own:
            raise ValueError(
                f"controller config key {key!r} is accepted by no registered controller "
                f"({list(available())}); is a plugin missing?"
            )
        kwargs[key] = tuple(value) if isinstance(value, list) else value
    return name, kwargs


def _typed(value: Any) -> Any:
    """A value with its type, sequences element by element: 1, 1.0 and True are equal keys
    in a dict, but not the same argument to a traced policy (an int and a float trace to
    different dtypes)."""
    if isinstance(value, list | tuple):
        return tuple(_typed(v) for v in value)
    return type(value), value


def _lookup(name: str, hint: str = PLUGIN_HINT) -> Factory:
    if name not in _FACTORIES:
        raise ValueError(f"unknown controller {name!r}; registered: {list(available())} ({hint})")
    return _FACTORIES[name]


def _qualified(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"
