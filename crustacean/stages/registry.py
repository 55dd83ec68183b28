"""The stage registry: how to run each stage of the pipeline, by name, in pipeline order.

The names and their order are data on the ground floor (`config.STAGES`, the fields of the
stages' config); this pairs each with the loader of its stage (default options), in that order.
`tick` runs what it finds here; a test checks that every loaded stage carries its own name.

Each stage module is imported when its stage is first asked for, not when the registry is:
importing the four (with the model runtime under them) costs about 250-400 ms on this machine,
which a tick that finds nothing due must not pay (`bench/tick_bench.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crustacean.config import STAGES

if TYPE_CHECKING:  # the skeleton pulls in the model runtime: only the loaders import it
    from crustacean.stages.skeleton import Stage


def _collect() -> Stage[Any, Any]:
    from crustacean.stages.collect import Collect

    return Collect()


def _curate() -> Stage[Any, Any]:
    from crustacean.stages.curate import Curate

    return Curate()


def _compile() -> Stage[Any, Any]:
    from crustacean.stages.compile import Compile

    return Compile()


def _calibrate() -> Stage[Any, Any]:
    from crustacean.stages.calibrate import Calibrate

    return Calibrate()


REGISTRY: dict[str, Callable[[], Stage[Any, Any]]] = dict(
    zip(STAGES, (_collect, _curate, _compile, _calibrate), strict=True)
)


def stage(name: str) -> Stage[Any, Any]:
    """The stage called `name`, with its default options."""
    return REGISTRY[name]()
