"""A stage that is only its model step, for the model runtime's tests and bench.

`run_stage` runs one `StageRequest` through the stage skeleton (lock, record, session, finish,
diff) with no pre-pass or post-pass of its own: what the four stages share, and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from crustacean.config import load_config
from crustacean.llm.client import resolve_credentials
from crustacean.llm.loop import StageRequest
from crustacean.stages.skeleton import Finish, Run, Stage, StageResult
from crustacean.workspace import Workspace

Handlers = dict[str, Callable[[dict[str, Any]], Any]]


@dataclass(frozen=True)
class OneRequest(Stage[None, StageResult]):
    """One request, run as its own stage; the credentials are checked before the lock."""

    request: StageRequest
    env: Mapping[str, str] | None = None
    handlers: Handlers | None = None

    @property  # type: ignore[override]  # the stage is whatever the request names
    def name(self) -> str:
        return self.request.stage

    def prepare(self, ws: Workspace, now: datetime, *, dry_run: bool) -> None:
        resolve_credentials(ws.settings, self.env)  # no key: a config error before any lock

    def plan(self, ws: Workspace, now: datetime, before: None) -> StageResult:
        raise NotImplementedError("plan a request with llm.runner.plan_stage")

    def execute(self, run: Run, before: None) -> Finish[StageResult]:
        outcome = run.session.run(self.request, self.handlers)
        return Finish(StageResult(), outcome.status, outcome.summary, outcome.error)


def run_stage(
    ws: Workspace,
    req: StageRequest,
    *,
    dry_run: bool = False,
    env: Mapping[str, str] | None = None,
    now: Callable[[], datetime] | None = None,
    handlers: Handlers | None = None,
) -> StageResult:
    """One model run of `req` through the skeleton."""
    return OneRequest(req, env, handlers).run(ws, dry_run=dry_run, env=env, clock=now)


def write_call(path: str, mode: str, message: str = "x", **fields: Any) -> tuple[str, Any]:
    """A `write_context` tool call of one change, for the fake API's `tool_use`."""
    change = {"path": path, "mode": mode, **fields}
    return ("write_context", {"changes": [change], "message": message})


def live(
    ws: Workspace, fake: Any, *overrides: str, key: str = "test-key"
) -> tuple[Workspace, dict[str, str]]:
    """The workspace as a model run sees it against the fake API (no retries), and its env."""
    env = {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": fake.url}
    config = load_config(ws.root, env=env, overrides=["llm.max_retries=0", *overrides])
    return Workspace(ws.root, config), env
