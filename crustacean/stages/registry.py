"""The stage registry: how to run each stage of the pipeline, by name, in pipeline order.

The names and their order are data on the ground floor (`config.STAGES`, the fields of the
stages' config); each names its module here and the stage class in it. `tick` runs what it
finds here; a test checks that every loaded stage carries its own name.

Each stage module is imported when its stage is first asked for, not when the registry is:
importing the four (with the model runtime under them) costs about 250-400 ms on this machine,
which a tick that finds nothing due must not pay (`bench/tick_bench.py`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the skeleton pulls in the model runtime: only `stage` imports it
    from crustacean.stages.skeleton import Stage


def stage(name: str) -> Stage[Any, Any]:
    """The stage called `name` (one of `config.STAGES`: `crustacean.stages.<name>`'s class of
    that name), with its default options."""
    found: Stage[Any, Any] = getattr(import_module(f"crustacean.stages.{name}"), name.title())()
    return found
