"""A stage's model step: its measured plan (`--plan`) and its model session (client, tools, loop).

Stages build a `StageRequest` from their deterministic pre-pass; the skeleton that runs them
(lock, record, clock, finish) is `crustacean/stages/skeleton.py`. What is mechanical about the
model side (credentials, client, tools, loop, the dry run's overlay) lives here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from crustacean.config import BudgetConfig
from crustacean.llm.client import ModelClient, resolve_credentials
from crustacean.llm.contract import CONTRACTS, check_changes
from crustacean.llm.loop import LoopOutcome, StageRequest, build_params, run_loop, tool_specs
from crustacean.llm.tools import ToolExecutor
from crustacean.runs import RunRecorder
from crustacean.store import Store
from crustacean.store.overlay import OverlayStore
from crustacean.usage import Usage, cost
from crustacean.workspace import Workspace

CHARS_PER_TOKEN = 4  # a conservative estimate for English prose and JSON


@dataclass(frozen=True)
class RunPlan:
    """What a run would send, without sending it (`--plan`)."""

    stage: str
    model: str
    system_chars: int
    tools: tuple[str, ...]
    tools_chars: int
    prompt_chars: int
    excerpt: str
    est_input_tokens: int
    est_cost_first_turn: float
    requests: int = 1
    """How many requests the estimates cover (collect sends a backlog as several)."""

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__, tools=list(self.tools))


def model_for(ws: Workspace, stage: str) -> tuple[str, str, str]:
    """(model id, tier, the config key to fix it) for a stage."""
    tier = getattr(ws.settings.stages, stage).tier if hasattr(ws.settings.stages, stage) else "mid"
    return getattr(ws.settings.models, tier), tier, f"models.{tier}"


def plan_stage(ws: Workspace, req: StageRequest) -> RunPlan:
    """The request of the first turn, measured; no key and no network needed."""
    model, tier, _ = model_for(ws, req.stage)
    params = build_params(req, model, [{"role": "user", "content": req.prompt}])
    system_chars = sum(len(b["text"]) for b in params["system"])
    tools_chars = len(json.dumps(params["tools"]))
    total = system_chars + tools_chars + len(req.prompt)
    tokens = total // CHARS_PER_TOKEN + 1
    price = getattr(ws.settings.prices, tier)
    first = cost(_first_turn_usage(params, tokens, (system_chars + tools_chars) // 4), price)
    first += cost(Usage(output_tokens=req.max_tokens // 8), price)
    excerpt = req.prompt if len(req.prompt) <= 600 else req.prompt[:600] + " …"
    return RunPlan(
        req.stage,
        model,
        system_chars,
        tuple(t.name for t in tool_specs(req)),
        tools_chars,
        len(req.prompt),
        excerpt,
        tokens,
        first,
    )


def _first_turn_usage(params: dict[str, Any], tokens: int, prefix: int) -> Usage:
    """How a first turn is billed: nothing is cached yet, so what its marks cover is a cache
    write (1.25x the input price), the rest plain input."""
    if "cache_control" in json.dumps(params["messages"]):
        return Usage(cache_write_tokens=tokens)
    if any("cache_control" in b for b in params["system"]):
        return Usage(input_tokens=tokens - prefix, cache_write_tokens=prefix)
    return Usage(input_tokens=tokens)


class ModelSession:
    """One run's model side: lazy client (no key needed until a call), store, tools, loop."""

    def __init__(
        self,
        ws: Workspace,
        rec: RunRecorder,
        stage: str,
        *,
        dry_run: bool,
        env: Mapping[str, str] | None,
    ) -> None:
        self.ws, self.rec, self.stage, self.env = ws, rec, stage, env
        # The run's clock (the stage's) dates what the store writes: trash folders, proposals.
        self.store: Store = OverlayStore(ws, rec.clock) if dry_run else Store(ws, rec.clock)
        self.model, self.tier, self.tier_key = model_for(ws, stage)
        rec.record.model = self.model
        self._client: ModelClient | None = None

    def client(self) -> ModelClient:
        if self._client is None:
            self._client = ModelClient(
                self.ws.settings, resolve_credentials(self.ws.settings, self.env)
            )
        return self._client

    def run(
        self,
        req: StageRequest,
        handlers: dict[str, Callable[[dict[str, Any]], Any]] | None = None,
        budget: BudgetConfig | None = None,
    ) -> LoopOutcome:
        """One agent loop; several may share a run (collect sends a large backlog in chunks
        and passes what is left of the run's budget)."""
        client = self.client()
        executor = ToolExecutor(
            self.store,
            self.stage,
            self.rec.record.id,
            _searcher(self.ws),
            handlers,
            offered=tuple(t.name for t in tool_specs(req)),
            guard=(lambda c: check_changes(req.stage, c)) if req.stage in CONTRACTS else None,
        )
        return run_loop(
            lambda **p: client.create(tier_key=self.tier_key, **p),
            req,
            self.model,
            executor,
            budget or self.ws.settings.budget,
            getattr(self.ws.settings.prices, self.tier),
            self.rec,
            on_turn=lambda u, c: _count(self.rec, u, c),
            on_send=self.rec.add_usage,
        )

    def diff(self) -> str | None:
        return self.store.diff() if isinstance(self.store, OverlayStore) else None


def _count(rec: RunRecorder, used: Usage, usd: float) -> None:
    rec.turn()
    rec.add_usage(used, usd)


def _searcher(ws: Workspace) -> Callable[[str, int | None, int | None], list[dict[str, Any]]]:
    def search(query: str, limit: int | None, budget: int | None) -> list[dict[str, Any]]:
        from crustacean.recall.search import SearchIndex

        with SearchIndex(ws) as index:
            return [h.to_json() for h in index.search(query, limit, budget_chars=budget)]

    return search
