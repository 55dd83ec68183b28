"""What every benchmark shares."""

from __future__ import annotations

import os
from pathlib import Path


def isolate(tmp: Path) -> None:
    """No user or system git config, no user crustacean config: both sides run the same git."""
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    os.environ.update(
        {
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "CRUSTACEAN_CONFIG_DIR": str(tmp / "userconfig"),
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@localhost",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@localhost",
        }
    )
    for var in [v for v in os.environ if v.startswith("CRUSTACEAN_") and "__" in v]:
        del os.environ[var]
    os.environ.pop("CRUSTACEAN_WORKSPACE", None)
