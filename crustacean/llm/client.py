"""The model client: key and URL resolution, retries and timeouts, error wording, cost.

`anthropic` is imported only when a model is really called, so commands that never call one
start fast.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crustacean.config import KEY_ENV, TOKEN_ENV, URL_ENV, Settings, env_file_path, read_env_file
from crustacean.errors import ConfigError, ModelError
from crustacean.secrets import redact

LOCAL_KEY = "local-server"  # a local server at a base URL often checks no key; the SDK needs one


@dataclass(frozen=True)
class Credentials:
    key: str
    base_url: str | None
    source: str  # where the key came from, for messages (never the key itself)
    bearer: bool = False  # ANTHROPIC_AUTH_TOKEN: sent as `Authorization: Bearer`, not x-api-key


def resolve_credentials(settings: Settings, env: Mapping[str, str] | None = None) -> Credentials:
    """Key from the environment, else the env file; base URL from config, else the environment."""
    env = os.environ if env is None else env
    file = env_file_path(settings, env)
    from_file = read_env_file(file)
    base_url = settings.llm.base_url or env.get(URL_ENV) or from_file.get(URL_ENV) or None
    for values, where in ((env, ""), (from_file, str(file))):
        for name in (KEY_ENV, TOKEN_ENV):
            if values.get(name):
                return Credentials(values[name], base_url, where or f"${name}", name == TOKEN_ENV)
    if base_url:
        return Credentials(LOCAL_KEY, base_url, "none (local server)")
    raise ConfigError(
        f"no API key: set {KEY_ENV}, or put {KEY_ENV}=... in {file} (cron runs read it), "
        f"or set {URL_ENV} for a local Anthropic-compatible server."
    )


class ModelClient:
    """One configured SDK client; every failure becomes a `ModelError` that names the fix."""

    def __init__(self, settings: Settings, creds: Credentials) -> None:
        import anthropic  # lazy: only runs that call a model pay for the import

        self._sdk = anthropic
        self.creds = creds
        self.settings = settings
        self.client = anthropic.Anthropic(
            api_key=None if creds.bearer else creds.key,
            auth_token=creds.key if creds.bearer else None,
            base_url=creds.base_url,
            max_retries=settings.llm.max_retries,
            timeout=settings.llm.timeout_seconds,
        )

    def create(self, *, tier_key: str, **params: Any) -> Any:
        """`messages.create`, with SDK errors turned into one clear line."""
        try:
            return self.client.messages.create(**params)
        except self._sdk.APIError as e:
            raise ModelError(self._explain(e, params.get("model", "?"), tier_key)) from None

    def batch(self, action: str, *args: Any, model: str, tier_key: str, **kw: Any) -> Any:
        """`messages.batches.<action>` (create, retrieve, results), errors worded as above;
        `results` is read whole here so a dropped connection is a `ModelError` too. A batch the
        API no longer has (404: expired results, deleted) gives None."""
        try:
            answer = getattr(self.client.messages.batches, action)(*args, **kw)
            return list(answer) if action == "results" else answer
        except self._sdk.NotFoundError:
            if action == "create":
                raise ModelError(
                    "the Message Batches API was not found (404) at "
                    f"{self.creds.base_url or 'the default URL'}; collect without --batch."
                ) from None
            return None
        except self._sdk.APIError as e:
            raise ModelError(self._explain(e, model, tier_key)) from None
        except self._sdk.AnthropicError as e:  # results asked of a batch that has none
            raise ModelError(redact(f"the batch API call failed: {e}")) from None

    def _explain(self, e: Exception, model: str, tier_key: str) -> str:
        sdk, retries = self._sdk, self.settings.llm.max_retries
        after = f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""
        if isinstance(e, sdk.AuthenticationError):
            text = f"the API key was rejected (401; key from {self.creds.source}); set a valid one."
        elif isinstance(e, sdk.PermissionDeniedError):
            text = (
                f"the API key may not use model {model!r} or this endpoint (403); set {tier_key} "
                "to a model your key may use, or use another key."
            )
        elif isinstance(e, sdk.NotFoundError):
            text = (
                f"model {model!r} was not found (404); set {tier_key} in crustacean.toml to "
                "a model id your account can use."
            )
        elif isinstance(e, sdk.APITimeoutError):
            text = (
                f"the API did not answer within {self.settings.llm.timeout_seconds:g}s"
                f"{after} (llm.timeout_seconds); try again later."
            )
        elif isinstance(e, sdk.APIConnectionError):
            text = (
                f"could not reach the API at {self.creds.base_url or 'the default URL'}"
                f"{after}; check the network or llm.base_url."
            )
        elif isinstance(e, sdk.APIStatusError):
            text = _status_text(e, after)
        else:
            text = (
                f"the model call failed: {type(e).__name__}; try again, and run "
                "`crustacean doctor --ping` to check the API."
            )
        return redact(text.replace(self.creds.key, "***"))


def _status_text(e: Any, after: str) -> str:
    status = getattr(e, "status_code", "?")
    if status == 429:
        return f"the API rate-limited the run (429){after}; try again later or lower the cadence."
    if status == 529:
        return f"the API was overloaded (529){after}; try again later."
    if isinstance(status, int) and status >= 500:
        return f"the API failed ({status}){after}; try again later."
    message = getattr(e, "message", "") or ""
    return (
        f"the API refused the request ({status}): {message[:200]}. "
        "Check llm.base_url and the models.* ids."
    )
