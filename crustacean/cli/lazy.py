"""Start-up in proportion to the command that runs.

Two costs of a typer CLI do not depend on the command: building every command (which imports
every command module), and pydantic, which typer 0.29 imports to coerce each typed parameter
through a `TypeAdapter` (about 60 ms before the command starts). So:

- `LazyCommands` holds the root's commands by name and builds one (importing its module) when it
  is looked up; listing them all (`--help`, docs/generate.py's walk) builds them all, so help
  and the generated reference stay complete and identical.
- `plain_params` gives the parameters whose annotation is plain (str, int, Path, bool, a list of
  those, no custom parser) a coercion that returns what typer's own would, without pydantic. It
  answers only where the result is certain (a str as it is; an int from its digits, inside its
  min/max; a Path made of a non-empty str, then typer's own `coerce_cli_path` for the path
  flags) and hands anything else to typer's own coercion, so every bad value gets typer's exact
  message. With a typer whose internals moved, it does nothing and typer coerces as always
  (tests/test_cli_lazy.py checks that it is active).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, get_args, get_origin

import typer

from crustacean.cli.common import flags_as_flags

try:  # typer internals (0.29); without them typer's own coercion serves every parameter
    from typer._coercion import RuntimeParam, build_runtime_param
    from typer._param_types import coerce_cli_path, routes_to_path
    from typer.core import _TyperParameter

    _INTERNALS = True
except ImportError:  # pragma: no cover - another typer
    _INTERNALS = False

_INT = re.compile(r"-?(?:0|[1-9][0-9]{0,17})")  # the spellings every int parser reads alike
_LEAVES = (str, int, bool, Path)


class _NotPlain(Exception):
    """This value is not one the plain coercion is sure of: typer's own decides."""


def _leaf(annotation: Any, value: Any, info: Any, param: Any, ctx: Any) -> Any:
    """One value, as typer's pydantic adapter would coerce it, or _NotPlain."""
    if annotation is str and isinstance(value, str):
        return value
    if annotation is int:
        if isinstance(value, str) and _INT.fullmatch(value):
            value = int(value)
        if type(value) is int and not info.clamp:
            low, high = info.min, info.max
            if (low is None or value >= low) and (high is None or value <= high):
                return value
    if annotation is not bool and routes_to_path(annotation, info):
        path_type = info.path_type
        if path_type is None and isinstance(annotation, type) and issubclass(annotation, Path):
            path_type = annotation
        if path_type is Path and isinstance(value, str) and value and "\0" not in value:
            value = Path(value)  # what pydantic makes of it; typer checks the flags
        if path_type is not None and not isinstance(value, path_type):
            raise _NotPlain
        return coerce_cli_path(value, info, path_type=path_type, param=param, ctx=ctx)
    raise _NotPlain


if _INTERNALS:

    @dataclass(frozen=True)
    class _PlainParam(RuntimeParam):
        """typer's RuntimeParam contract (None, multi-value checks are its own `coerce`)."""

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info = self.parameter_info
            annotation: Any = self.annotation  # typer's alias admits a ParamSpec; never here
            try:
                if get_origin(annotation) is list:
                    (item,) = get_args(annotation)
                    items = value if isinstance(value, list | tuple) else [value]
                    return [_leaf(item, v, info, param, ctx) for v in items]
                return _leaf(annotation, value, info, param, ctx)
            except _NotPlain:
                own = build_runtime_param(param.type_descriptor)
                return own._coerce_value(value, param=param, ctx=ctx)


def _is_plain(param: Any) -> bool:
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is None or descriptor.parameter_info.parser is not None or descriptor.is_file:
        return False
    if getattr(descriptor.parameter_info, "click_type", None) is not None:
        return False
    annotation = descriptor.annotation
    if get_origin(annotation) is list:
        args = get_args(annotation)
        return len(args) == 1 and args[0] in _LEAVES and args[0] is not bool
    return annotation in _LEAVES


def plain_params(command: Any, help_names: Sequence[str]) -> None:
    """Give `command`'s plain parameters, its help option and its loaded subcommands' the plain
    coercion. `help_names`: the help option names its context inherits (the root's settings)."""
    if not _INTERNALS:  # pragma: no cover - another typer
        return
    names = (command.context_settings or {}).get("help_option_names", help_names)
    if names:  # built now, as click would on the first parse (and cached on the command)
        command.get_help_option(SimpleNamespace(help_option_names=list(names)))
    help_option = getattr(command, "_help_option", None)
    for param in [*command.params, *([help_option] if help_option else [])]:
        if isinstance(param, _TyperParameter) and param._runtime_param is None and _is_plain(param):
            info = param.type_descriptor
            param._runtime_param = _PlainParam(info.parameter_info, info.annotation)
    commands = getattr(command, "commands", None)
    if isinstance(commands, dict):  # a sub-app's group: typer built all of its commands
        for sub in commands.values():
            plain_params(sub, names)


def loader(
    app: typer.Typer, name: str, module: str, attr: str, help_names: Sequence[str]
) -> Callable[[], Any]:
    """Build `name` from `module.attr` (a command function, or a Typer for a group) exactly as
    `app.command(name)` / `app.add_typer(..., name=name)` would have."""

    def load() -> Any:
        target = getattr(importlib.import_module(module), attr)
        scratch = typer.Typer()
        if isinstance(target, typer.Typer):
            scratch.add_typer(target, name=name)
            built: Any = typer.main.get_group_from_info(
                scratch.registered_groups[0],
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
                suggest_commands=app.suggest_commands,
            )
        else:
            scratch.command(name)(target)
            built = typer.main.get_command_from_info(
                scratch.registered_commands[0],
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
        plain_params(built, help_names)
        if not isinstance(target, typer.Typer):  # a group's CrustaceanGroup does its own
            flags_as_flags(built)
        return built

    return load


class LazyCommands(MutableMapping[str, Any]):
    """A group's commands by name, in `--help` order, each built on first lookup.

    Inside `listing()` (the root's help and completion), a command not built yet is looked up
    as a stand-in that carries only its name and summary: all a listing reads of it."""

    def __init__(
        self, loaders: dict[str, Callable[[], Any]], summaries: dict[str, str] | None = None
    ) -> None:
        self._loaders = dict(loaders)
        self._built: dict[str, Any] = {}
        self._summaries = dict(summaries or {})
        self._listing = 0

    @contextmanager
    def listing(self) -> Iterator[None]:
        self._listing += 1
        try:
            yield
        finally:
            self._listing -= 1

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:  # an unknown name: the KeyError of a dict
            if self._listing and name in self._summaries:
                return typer.core.TyperCommand(name, help=self._summaries[name])
            self._built[name] = self._loaders[name]()
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaders.setdefault(name, lambda: command)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaders[name]
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaders)

    def __len__(self) -> int:
        return len(self._loaders)

    def __contains__(self, name: object) -> bool:
        return name in self._loaders
