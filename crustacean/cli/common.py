"""What every command shares: the consoles, the global options and the one error boundary."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from typer.core import TyperGroup

from crustacean.errors import CrustaceanError
from crustacean.workspace import Workspace, open_workspace

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)


@dataclass
class AppState:
    """Global options, set by the root callback."""

    workspace: Path | None = None
    overrides: list[str] = field(default_factory=list)

    def open(self) -> Workspace:
        ws = open_workspace(self.workspace, self.overrides)
        for warning in ws.config.warnings:
            err_console.print(f"Warning: {warning}", markup=False)
        return ws


def state(ctx: typer.Context) -> AppState:
    root = ctx.find_root()
    if not isinstance(root.obj, AppState):
        root.obj = AppState()
    return root.obj


def print_json(data: Any) -> None:
    console.print_json(json.dumps(data, default=str))


def fail(message: str, code: int) -> typer.Exit:
    err_console.print(f"Error: {message}", markup=False, soft_wrap=True)
    return typer.Exit(code)


class CrustaceanGroup(TyperGroup):
    """Translates `CrustaceanError` into `Error: …` on stderr and its exit code, once."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except CrustaceanError as e:
            raise fail(str(e), e.exit_code) from None
