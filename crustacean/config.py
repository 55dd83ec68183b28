"""Layered, typed configuration.

Layers, lowest first: defaults < org file (`CRUSTACEAN_ORG_CONFIG`) < user file (platformdirs
config dir) < workspace `crustacean.toml` < environment (`CRUSTACEAN_SECTION__KEY`) < flags
(`-c key=value`). A key listed in the org file's `governance.locked` keeps the org value; a lower
layer that sets it gets a warning naming the file and the key.

The schema is the sections below: every key has a default and a one-line doc (its `Key`), so
the default `crustacean.toml`, `config show` and the docs are all generated from one place. The
sections are NamedTuples, not frozen dataclasses: every command reads the config, and 24 frozen
dataclasses cost ~14 ms of code generation at each start-up (bench/RESULTS.md, session 9).
"""

import os
import re
import tomllib
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, TypeVar

from crustacean.errors import ConfigError

ENV_PREFIX = "CRUSTACEAN_"
ORG_ENV = "CRUSTACEAN_ORG_CONFIG"
CONFIG_DIR_ENV = "CRUSTACEAN_CONFIG_DIR"
WORKSPACE_FILE = "crustacean.toml"

Tier = Literal["small", "mid", "large"]
SourceKind = Literal["auto", "openclaw", "claude_code", "plain"]


class Key(NamedTuple):
    """A config key's one-line doc and optional named validator (`CHECKS`), the metadata of
    its `Annotated` type in the sections below."""

    doc: str
    check: str | None = None


class WorkspaceConfig(NamedTuple):
    """[workspace]: where the daily logs go and which zone says what today is."""

    timezone: Annotated[
        str, Key("IANA zone that decides what 'today' is; empty = system zone", "tz")
    ] = ""
    daily_dir: Annotated[
        Literal["root", "daily"], Key("daily logs in memory/ (root) or memory/daily/ (daily)")
    ] = "root"


class ModelsConfig(NamedTuple):
    """[models]: the model id of each tier."""

    small: Annotated[str, Key("model id of the small tier (collect)")] = "claude-haiku-5-5"
    mid: Annotated[str, Key("model id of the mid tier (curate)")] = "claude-sonnet-5-5"
    large: Annotated[str, Key("model id of the large tier (compile, calibrate)")] = (
        "claude-opus-5-5"
    )


class StageConfig(NamedTuple):
    """One stage's [stages.NAME]: whether it runs, on which tier, when."""

    enabled: Annotated[bool, Key("whether tick and cron run this stage")] = True
    tier: Annotated[Tier, Key("model tier this stage runs on")] = "mid"
    schedule: Annotated[
        str, Key("5-field cron expression (minute hour day month weekday)", "cron")
    ] = "0 3 * * *"


class StagesConfig(NamedTuple):
    """[stages]: the four stages of the pipeline, in run order."""

    collect: Annotated[StageConfig, Key("collect: every 2 hours")] = StageConfig(
        tier="small", schedule="0 */2 * * *"
    )
    curate: Annotated[StageConfig, Key("curate: daily")] = StageConfig(
        tier="mid", schedule="30 3 * * *"
    )
    compile: Annotated[StageConfig, Key("compile: weekly, Sunday")] = StageConfig(
        tier="large", schedule="0 4 * * 0"
    )
    calibrate: Annotated[StageConfig, Key("calibrate: monthly, on the 1st")] = StageConfig(
        tier="large", schedule="0 5 1 * *"
    )


STAGES: tuple[str, ...] = StagesConfig._fields
"""The pipeline's stages in run order: the one list (the registry in stages/, tick, status,
health, cron, run records and the write policy's actors read it from here)."""
# The stages' own schedules: valid, so a config that keeps them does not import croniter to
# check them (tests/test_config.py checks croniter agrees).
_DEFAULT_SCHEDULES: frozenset[str] = frozenset(stage.schedule for stage in StagesConfig())


class MemoryConfig(NamedTuple):
    """[memory]: who may write, and the caps of context and MEMORY.md."""

    write: Annotated[
        Literal["direct", "review", "off"],
        Key("model writes: direct, review (every write is a proposal) or off (read-only)"),
    ] = "direct"
    max_entries: Annotated[
        int, Key("context: at most this many memory entries, newest first", "pos")
    ] = 50
    budget_chars: Annotated[int, Key("context: character budget of the memory section", "pos")] = (
        20000
    )
    working_lines: Annotated[int, Key("MEMORY.md line cap", "pos")] = 500
    working_chars: Annotated[
        int, Key("MEMORY.md character cap (OpenClaw's bootstrap limit)", "pos")
    ] = 12000


class TiersConfig(NamedTuple):
    """[tiers]: the thresholds of the tier lifecycle (seed 002)."""

    hot_days: Annotated[int, Key("hot to warm after this many days without recall...", "pos")] = 7
    hot_min_uses: Annotated[int, Key("...and fewer than this many total uses", "pos")] = 5
    warm_days: Annotated[int, Key("warm to cold after this many days without recall", "pos")] = 30
    cold_days: Annotated[int, Key("cold to archive after this many days without recall", "pos")] = (
        90
    )
    hot_limit: Annotated[int, Key("at most this many hot memories", "pos")] = 20
    memory_cap: Annotated[
        int, Key("total memories before the lowest cold ones are archived", "pos")
    ] = 10000


class ArchiveConfig(NamedTuple):
    """[archive]: when daily logs move to archive/."""

    daily_after_days: Annotated[int, Key("archive daily logs older than this many days", "pos")] = (
        30
    )


class StoreConfig(NamedTuple):
    """[store]: the write layer's limits."""

    max_file_bytes: Annotated[int, Key("largest file a write may leave behind (256 KB)", "pos")] = (
        262144
    )
    max_files_per_call: Annotated[
        int, Key("most files one write_context call may change", "pos")
    ] = 20
    max_snapshot_bytes: Annotated[
        int,
        Key(
            "largest file init's baseline or a snapshot of user edits commits (1 MB); "
            "bigger ones are left out",
            "pos",
        ),
    ] = 1048576


class BudgetConfig(NamedTuple):
    """[budget]: where one model run stops as partial."""

    max_turns: Annotated[int, Key("model turns per run before it stops as partial", "pos")] = 40
    max_input_tokens: Annotated[
        int, Key("input tokens per run before it stops as partial", "pos")
    ] = 400000


class LlmConfig(NamedTuple):
    """[llm]: how the model API is reached."""

    base_url: Annotated[
        str, Key("Anthropic-compatible API URL; empty = ANTHROPIC_BASE_URL or default")
    ] = ""
    max_retries: Annotated[
        int, Key("retries on 408/409/429/5xx and connection errors", "nonneg")
    ] = 2
    timeout_seconds: Annotated[float, Key("timeout of one model request", "posf")] = 120.0
    env_file: Annotated[
        str, Key("file with ANTHROPIC_API_KEY=... for cron; empty = the default")
    ] = ""


class PriceConfig(NamedTuple):
    """The estimated prices of one tier's model, USD per million tokens."""

    input: Annotated[float, Key("USD per million input tokens", "nonnegf")] = 3.0
    output: Annotated[float, Key("USD per million output tokens", "nonnegf")] = 15.0
    cache_read: Annotated[float, Key("USD per million cache-read input tokens", "nonnegf")] = 0.3
    cache_write: Annotated[float, Key("USD per million cache-write input tokens", "nonnegf")] = 3.75


# The list prices of the default models (models.*) on the date below, from the model pages of
# Anthropic's platform docs; cache writes are the 5-minute ones. Costs shown by crustacean are
# estimates from these keys, so a workspace that runs other models should set its own.
PRICES_AS_OF = "2026-12-01"


class PricesConfig(NamedTuple):
    """[prices]: each tier's estimated prices (costs shown are estimates from these)."""

    small: Annotated[
        PriceConfig,
        Key(
            "estimated prices of the small tier's model (Haiku 5.5, prompts "
            "up to 100K tokens; a longer prompt costs 5x)"
        ),
    ] = PriceConfig(0.10, 0.50, 0.01, 0.125)
    mid: Annotated[PriceConfig, Key("estimated prices of the mid tier's model (Sonnet 5.5)")] = (
        PriceConfig(2.0, 10.0, 0.10, 2.50)
    )
    large: Annotated[PriceConfig, Key("estimated prices of the large tier's model (Opus 5.5)")] = (
        PriceConfig(4.0, 20.0, 0.20, 5.00)
    )


class ContextConfig(NamedTuple):
    """[context]: the budgets of `context` and of the context tools."""

    foundation_chars: Annotated[
        int, Key("context: budget of foundation files + daily logs", "pos")
    ] = 30000
    hook_chars: Annotated[
        int,
        Key(
            "most characters `context --format claude-hook` prints (Claude Code cuts 10,000)", "pos"
        ),
    ] = 9500
    not_loaded_paths: Annotated[
        int,
        Key(
            "context: paths named per folder in the 'Not loaded' list (the rest are counted)", "pos"
        ),
    ] = 5
    list_limit: Annotated[
        int, Key("list_context_files (MCP and stages): most files one call returns", "pos")
    ] = 100
    read_chars: Annotated[
        int,
        Key("read_context_file (MCP and stages): largest reply; more needs a line range", "pos"),
    ] = 60000


class CollectConfig(NamedTuple):
    """[collect]: how long a scheduled collect lets a small increment wait."""

    max_wait_hours: Annotated[
        float,
        Key(
            "a scheduled collect (tick, cron) with less new text than is worth a call waits for "
            "more, up to this many hours after its oldest new message (0 = never waits); a "
            "manual `crustacean collect` always runs now",
            "nonnegf",
        ),
    ] = 12.0


class CurateConfig(NamedTuple):
    """[curate]: how many days curate reads."""

    days: Annotated[int, Key("curate the daily entries of this many last days", "pos")] = 3


class McpConfig(NamedTuple):
    """[mcp]: what the MCP server may write."""

    write: Annotated[
        Literal["direct", "ask", "off"],
        Key("MCP writes: direct (within policy), ask (every write a proposal) or off"),
    ] = "direct"


class CompileConfig(NamedTuple):
    """[compile]: the loss guard of the model stages' writes."""

    max_loss_fraction: Annotated[
        float,
        Key(
            "refuse a curate/compile/calibrate run's writes once they lose more than this share "
            "of a file's lines (content found nowhere the call leaves behind)",
            "fraction",
        ),
    ] = 0.10
    loss_floor_lines: Annotated[
        int, Key("...but always let a run lose this many lines of a file (small files)", "nonneg")
    ] = 3


class SourceConfig(NamedTuple):
    """One [[sources]] table: where collect finds transcripts."""

    kind: Annotated[SourceKind, Key("transcript format")] = "auto"
    path: Annotated[
        str,
        Key(
            "folder (or file) of transcripts; ~ is expanded, a relative path is inside the "
            "workspace",
            "required",
        ),
    ] = ""
    glob: Annotated[str, Key("file pattern inside path; empty = the format's default")] = ""
    name: Annotated[str, Key("a name for --source; empty = the kind")] = ""


class GovernanceConfig(NamedTuple):
    """[governance]: what the org file locks."""

    locked: Annotated[
        list[str], Key("keys lower layers may not override (read from the org file)")
    ] = []  # noqa: RUF012  # never changed in place: a NamedTuple's default is shared


class Settings(NamedTuple):
    """Every config section: the effective values a run reads."""

    workspace: WorkspaceConfig = WorkspaceConfig()
    models: ModelsConfig = ModelsConfig()
    stages: StagesConfig = StagesConfig()
    memory: MemoryConfig = MemoryConfig()
    tiers: TiersConfig = TiersConfig()
    archive: ArchiveConfig = ArchiveConfig()
    store: StoreConfig = StoreConfig()
    budget: BudgetConfig = BudgetConfig()
    llm: LlmConfig = LlmConfig()
    prices: PricesConfig = PricesConfig()
    context: ContextConfig = ContextConfig()
    collect: CollectConfig = CollectConfig()
    curate: CurateConfig = CurateConfig()
    compile: CompileConfig = CompileConfig()
    mcp: McpConfig = McpConfig()
    sources: Annotated[
        list[SourceConfig], Key("transcript sources collect reads ([[sources]] tables)")
    ] = []  # noqa: RUF012  # never changed in place, as `locked`
    governance: GovernanceConfig = GovernanceConfig()


# ---------------------------------------------------------------- schema


class KeySpec(NamedTuple):
    """One leaf key of the schema."""

    name: str
    type: Any
    default: Any
    doc: str
    check: str | None


class Field(NamedTuple):
    """One field of a section: its name, type (without its `Key`), default and `Key` (None for
    a section of `Settings`, which has no doc of its own)."""

    name: str
    type: Any
    default: Any
    key: Key | None


def fields(cls: type) -> list[Field]:
    """A section's fields in declaration order. This module has no `from __future__ import
    annotations`, so the annotations are objects already and `get_type_hints` (slow at
    start-up) is not needed."""
    defaults: dict[str, Any] = getattr(cls, "_field_defaults", {})
    found = []
    for name, tp in cls.__annotations__.items():
        key = None
        meta = getattr(tp, "__metadata__", ())  # Annotated[type, Key(...)]
        if meta:
            tp, key = tp.__origin__, next((m for m in meta if isinstance(m, Key)), None)
        found.append(Field(name, tp, defaults.get(name), key))
    return found


def is_section(tp: Any) -> bool:
    """Whether a field's type is a section (or a [[sources]] table) rather than a value."""
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_field_defaults")


def schema(cls: type = Settings, prefix: str = "", defaults: Any = None) -> list[KeySpec]:
    """Every leaf key in declaration order (`sources` is one list-of-tables key); a nested
    section's defaults are its parent's (`stages.collect` runs on the small tier)."""
    defaults = cls() if defaults is None else defaults
    keys: list[KeySpec] = []
    for f in fields(cls):
        name, value = f"{prefix}{f.name}", getattr(defaults, f.name)
        if is_section(f.type):
            keys.extend(schema(f.type, f"{name}.", value))
        else:
            assert f.key is not None  # every leaf has its doc
            keys.append(KeySpec(name, f.type, value, f.key.doc, f.key.check))
    return keys


SCHEMA: dict[str, KeySpec] = {k.name: k for k in schema()}
SECTIONS: set[str] = {
    ".".join(k.split(".")[:i]) for k in SCHEMA for i in range(1, k.count(".") + 1)
}


def describe_type(tp: Any) -> str:
    """Say what a value must be, in the words of an error message."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(f'"{a}"' for a in typing.get_args(tp))
    if origin is list:
        inner = typing.get_args(tp)[0]
        return "an array of tables" if is_section(inner) else "an array of strings"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}[tp]


def _check_cron(value: str) -> str | None:
    if len(value.split()) != 5:
        return "a 5-field cron expression (minute hour day month weekday); 6 fields read as seconds"
    if value in _DEFAULT_SCHEDULES:
        return None
    from croniter import croniter  # lazy: only files that set a schedule pay for the import

    return None if croniter.is_valid(value) else "a valid 5-field cron expression"


def _check_tz(value: str) -> str | None:
    if not value:
        return None
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError):
        return 'an IANA time zone such as "Europe/Berlin", or "" for the system zone'
    return None


CHECKS: dict[str, Callable[[Any], str | None]] = {
    "cron": _check_cron,
    "tz": _check_tz,
    "pos": lambda v: None if v >= 1 else "an integer of at least 1",
    "nonneg": lambda v: None if v >= 0 else "an integer of at least 0",
    "posf": lambda v: None if v > 0 else "a number greater than 0",
    "nonnegf": lambda v: None if v >= 0 else "a number of at least 0",
    "fraction": lambda v: None if 0 <= v <= 1 else "a number from 0 to 1",
    "required": lambda v: None if v else "a non-empty string",
}

# What each check allows, in words, for docs/configuration.md (docs/generate.py); a new check
# needs its line here, or the generator stops.
CHECK_DOCS: dict[str, str] = {
    "cron": "a 5-field cron expression (minute hour day month weekday)",
    "tz": 'an IANA time zone such as "Europe/Berlin", or "" for the system zone',
    "pos": "an integer of at least 1",
    "nonneg": "an integer of at least 0",
    "posf": "a number greater than 0",
    "nonnegf": "a number of at least 0",
    "fraction": "a number from 0 to 1",
    "required": "required: a non-empty string",
}


def coerce(tp: Any, value: Any, check: str | None) -> tuple[Any, str | None]:
    """Validate one value against its type; return (value, None) or (None, what was expected)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        ok = value in typing.get_args(tp)
    elif origin is list:
        inner = typing.get_args(tp)[0]
        if is_section(inner):
            return _coerce_tables(inner, value)
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    elif tp is bool:
        ok = isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        value = float(value) if ok else value
    else:
        ok = isinstance(value, str)
    if not ok:
        return None, describe_type(tp)
    problem = CHECKS[check](value) if check else None
    return (None, problem) if problem else (value, None)


def _coerce_tables(cls: type, value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        return None, "an array of tables ([[sources]] with kind, path, glob)"
    keys = {f.name: f for f in fields(cls)}
    items = []
    for i, table in enumerate(value):
        for key, raw in table.items():
            if key not in keys:
                return None, f"known keys only in item {i + 1} ({', '.join(keys)}); not '{key}'"
            f = keys[key]
            _, problem = coerce(f.type, raw, f.key.check if f.key else None)
            if problem:
                return None, f"item {i + 1}: '{key}' must be {problem}"
        missing = [
            k for k, f in keys.items() if f.key and f.key.check == "required" and k not in table
        ]
        if missing:
            return None, f"item {i + 1}: '{missing[0]}' must be set"
        items.append(cls(**table))
    return items, None


def parse_text_value(tp: Any, text: str) -> Any:
    """Turn an env or flag string into the key's type, so `coerce` can check it."""
    if tp is bool:
        low = text.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        return text
    if tp is int:
        try:
            return int(text)
        except ValueError:
            return text
    if tp is float:
        try:
            return float(text)
        except ValueError:
            return text
    if typing.get_origin(tp) is list and not is_section(typing.get_args(tp)[0]):
        return [part.strip() for part in text.split(",") if part.strip()]
    return text


# ---------------------------------------------------------------- layers


class Layer(NamedTuple):
    """One source of values: its label (shown by `config show`) and the values it set."""

    name: str  # default | org | user | workspace | env | flag
    source: str  # a file path, an env var list, or "-c"
    values: dict[str, Any]


class LoadedConfig(NamedTuple):
    """The merged layers: the settings, and where each value came from."""

    settings: Settings
    origins: dict[str, str]  # key -> layer name
    sources: dict[str, str]  # layer name -> file / description
    locked: frozenset[str]
    warnings: tuple[str, ...]
    values: dict[str, Any]

    def get(self, key: str) -> Any:
        return self.values[key]


def user_config_dir(env: Mapping[str, str] | None = None) -> Path:
    """One place for the user's config, with an env override for tests and odd setups."""
    env = os.environ if env is None else env
    if env.get(CONFIG_DIR_ENV):
        return Path(env[CONFIG_DIR_ENV]).expanduser()
    from platformdirs import user_config_dir as _ucd

    return Path(_ucd("crustacean", appauthor=False))


def user_config_file(env: Mapping[str, str] | None = None) -> Path:
    return user_config_dir(env) / "config.toml"


def flatten(table: Mapping[str, Any], path: str, origin: str) -> dict[str, Any]:
    """Validate a parsed TOML table against the schema and return dotted key -> value."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{path}{key}"
        if name in SCHEMA:
            spec = SCHEMA[name]
            coerced, problem = coerce(spec.type, value, spec.check)
            if problem:
                raise ConfigError(f"{origin}: key '{name}' must be {problem} (got {value!r}).")
            out[name] = coerced
        elif name in SECTIONS and isinstance(value, dict):
            out.update(flatten(value, f"{name}.", origin))
        else:
            raise ConfigError(f"{origin}: unknown key '{name}'. {_known_hint(path)}")
    return out


def _known_hint(path: str) -> str:
    section = path.rstrip(".")
    keys = sorted(
        {k[len(path) :].split(".")[0] for k in SCHEMA if k.startswith(path)}
        if path
        else {k.split(".")[0] for k in SCHEMA}
    )
    where = f"in [{section}]" if section else "at the top level"
    return f"Known keys {where}: {', '.join(keys)} (see `crustacean config show`)."


def read_toml_layer(name: str, path: Path) -> Layer:
    """Read one TOML file as a layer; a missing file is an empty layer."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Layer(name, str(path), {})
    except OSError as e:
        raise ConfigError(
            f"{path}: cannot read config file ({e.strerror}); fix its permissions or move it aside."
        ) from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
        return Layer(name, str(path), flatten(data, "", str(path)))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config file is not UTF-8 text; save it as UTF-8.") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: TOML syntax error: {e}. Fix that line and try again.") from None
    except RecursionError:  # tomllib's parser recurses once per level of nesting
        raise ConfigError(
            f"{path}: config file is nested too deeply to read; no setting needs more than a "
            "few levels, so remove the deep array or table."
        ) from None


def env_layer(env: Mapping[str, str]) -> Layer:
    """`CRUSTACEAN_MEMORY__WRITE=off` sets `memory.write`; only names with `__` are keys."""
    values: dict[str, Any] = {}
    for var, text in env.items():
        if not var.startswith(ENV_PREFIX) or "__" not in var:
            continue
        key = var[len(ENV_PREFIX) :].lower().replace("__", ".")
        values.update(_text_value(key, text, f"environment variable {var}"))
    return Layer("env", "environment", values)


def flag_layer(pairs: list[str]) -> Layer:
    values: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ConfigError(f"-c {pair!r}: expected KEY=VALUE, for example -c memory.write=off.")
        values.update(_text_value(key.strip(), text, f"-c {key.strip()}"))
    return Layer("flag", "-c", values)


def _text_value(key: str, text: str, origin: str) -> dict[str, Any]:
    spec = SCHEMA.get(key)
    if spec is None or key == "sources":
        raise ConfigError(f"{origin}: unknown key '{key}'. See `crustacean config show` for keys.")
    coerced, problem = coerce(spec.type, parse_text_value(spec.type, text), spec.check)
    if problem:
        raise ConfigError(f"{origin}: key '{key}' must be {problem} (got {text!r}).")
    return {key: coerced}


def merge(layers: list[Layer]) -> LoadedConfig:
    """Apply layers in order, honouring the org file's locks."""
    org = next((lay for lay in layers if lay.name == "org"), None)
    locked = frozenset(org.values.get("governance.locked", [])) if org else frozenset()
    unknown = sorted(k for k in locked if k not in SCHEMA)
    if unknown and org:
        raise ConfigError(
            f"{org.source}: governance.locked names unknown key '{unknown[0]}'; fix or remove it "
            "(`crustacean config show` lists the keys)."
        )
    values = {k: spec.default for k, spec in SCHEMA.items()}
    origins = dict.fromkeys(SCHEMA, "default")
    warnings: list[str] = []
    for layer in layers:
        for key, value in layer.values.items():
            if key in locked and layer.name not in ("org", "default"):
                warnings.append(
                    f"{layer.source}: '{key}' is locked by the org config; its value is ignored."
                )
                continue
            if key == "governance.locked" and layer.name != "org":
                warnings.append(
                    f"{layer.source}: governance.locked is only read from the org file."
                )
                continue
            values[key] = value
            origins[key] = layer.name
    return LoadedConfig(
        settings=build_settings(values),
        origins=origins,
        sources={lay.name: lay.source for lay in layers},
        locked=locked,
        warnings=tuple(warnings),
        values=values,
    )


def build_settings(values: Mapping[str, Any]) -> Settings:
    """Turn dotted keys back into the nested sections."""
    return _build(Settings, values, "")


_S = TypeVar("_S")


def _build(cls: type[_S], values: Mapping[str, Any], prefix: str) -> _S:
    kwargs = {}
    for f in fields(cls):
        name = f"{prefix}{f.name}"
        kwargs[f.name] = _build(f.type, values, f"{name}.") if is_section(f.type) else values[name]
    return cls(**kwargs)


def load_config(
    workspace: Path | None,
    env: Mapping[str, str] | None = None,
    overrides: list[str] | None = None,
) -> LoadedConfig:
    """Load every layer for a workspace (or none, outside one)."""
    env = os.environ if env is None else env
    layers = [Layer("default", "built-in", {})]
    if env.get(ORG_ENV):
        org_path = Path(env[ORG_ENV]).expanduser()
        if not org_path.is_file():
            raise ConfigError(
                f"{ORG_ENV} points to {org_path}, which is not a file; fix or unset it."
            )
        layers.append(read_toml_layer("org", org_path))
    layers.append(read_toml_layer("user", user_config_file(env)))
    if workspace is not None:
        layers.append(read_toml_layer("workspace", workspace / WORKSPACE_FILE))
    layers.append(env_layer(env))
    layers.append(flag_layer(overrides or []))
    return merge(layers)


# ---------------------------------------------------------------- rendering


def toml_value(value: Any) -> str:
    """Render a scalar or list of strings as TOML."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


# Keys that describe this workspace rather than a taste: init writes them, and they are never
# "redundant" even when they equal the default (a new default must not move a workspace's logs).
FACT_KEYS = frozenset({"workspace.daily_dir", "sources"})


def redundant_keys(
    loaded: LoadedConfig, layers: tuple[str, ...] = ("user", "workspace")
) -> list[str]:
    """Keys a config file sets to exactly the default: they only stop a new default arriving."""
    return [
        key
        for key, spec in SCHEMA.items()
        if loaded.origins[key] in layers
        and key not in FACT_KEYS
        and loaded.values[key] == spec.default
    ]


class ConfigRow(NamedTuple):
    """One key as `config show` reports it: its effective value, the layer it came from and
    whether a config file only repeats the default."""

    key: str
    value: Any
    default: Any
    layer: str
    source: str
    locked: bool
    redundant: bool

    def to_json(self) -> dict[str, object]:
        return dict(self._asdict())

    def shown(self) -> str:
        """The value as TOML, but a source list as its count (it is a table per source)."""
        return f"{len(self.value)} source(s)" if self.key == "sources" else toml_value(self.value)


def config_rows(loaded: LoadedConfig, *, redundant_only: bool = False) -> list[ConfigRow]:
    """Every key in schema order (or only the redundant ones), with where its value came from."""
    repeats = set(redundant_keys(loaded))
    rows = []
    for key in SCHEMA:
        if redundant_only and key not in repeats:
            continue
        value, default = loaded.values[key], SCHEMA[key].default
        if key == "sources":
            value, default = [s._asdict() for s in value], []
        layer = loaded.origins[key]
        source = loaded.sources.get(layer, "")
        rows.append(
            ConfigRow(key, value, default, layer, source, key in loaded.locked, key in repeats)
        )
    return rows


def render_workspace_toml(
    chosen: Mapping[str, Any] | None = None, sources: list[SourceConfig] | None = None
) -> str:
    """The workspace `crustacean.toml` that `init` writes.

    Only the keys in `chosen` (the workspace's facts and what the user asked for) are set; every
    other key is there commented out at its default, with what it does, so a release that moves
    a default moves this workspace too, and uncommenting a line is how to choose a value.
    """
    chosen = chosen or {}
    lines = [
        "# crustacean workspace config. Only what this workspace chose is set; every other key",
        "# is commented out at its default (a newer release may change it): uncomment to choose.",
        "# Layers: org file < user file < this file < CRUSTACEAN_SECTION__KEY env < -c flags.",
        "# `crustacean config show` prints each value and where it came from;",
        "# `crustacean config show --redundant` lists set keys that only repeat a default.",
    ]
    section = None
    for spec in SCHEMA.values():
        if spec.name.startswith("governance.") or spec.name == "sources":
            continue
        sec, _, key = spec.name.rpartition(".")
        if sec != section:
            lines += ["", f"[{sec}]"]
            section = sec
        if spec.name in chosen:
            lines.append(f"{key} = {toml_value(chosen[spec.name])}  # {spec.doc}")
        else:
            lines.append(f"# {key} = {toml_value(spec.default)}  # {spec.doc}")
    lines += [
        "",
        "# Transcript sources for collect, one [[sources]] table each. kind is auto, openclaw,",
        "# claude_code or plain; glob is optional. For example:",
        "# [[sources]]",
        '# kind = "openclaw"',
        '# path = "~/.openclaw/agents/main/sessions"',
        "",
        "# [governance] locked = [...] is read only from the org file (CRUSTACEAN_ORG_CONFIG).",
        "",
    ]
    for src in sources or []:
        lines += ["[[sources]]", f"kind = {toml_value(src.kind)}", f"path = {toml_value(src.path)}"]
        lines += [f"name = {toml_value(src.name)}", ""] if src.name else [""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the env file (API key for cron)

KEY_ENV = "ANTHROPIC_API_KEY"
TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN"
URL_ENV = "ANTHROPIC_BASE_URL"
ENV_FILE_NAME = "env"


def default_env_file(env: Mapping[str, str] | None = None) -> Path:
    """The env file cron runs read, since cron does not inherit the shell's environment."""
    return user_config_dir(env) / ENV_FILE_NAME


def env_file_path(settings: Settings, env: Mapping[str, str] | None = None) -> Path:
    """The env file every run reads (`llm.env_file`, else the default): one answer for runs,
    `cron install`, `doctor` and `paths`, so they never disagree about where the key is."""
    configured = settings.llm.env_file
    return Path(configured).expanduser() if configured else default_env_file(env)


# Patterns, not compiled here: only doctor and status use them, and `re` compiles
# and keeps each on its first use (~0.2 ms every other command need not pay).
_PLACEHOLDER_KEY = (
    r"(?i)\.\.\.|…|<[^>]*>|your[_ -]?(?:api[_ -]?)?key|changeme|placeholder|replace[_ -]?me"
    r"|^\$|^(?:sk-ant-(?:api\d+-)?)?[x*]{4,}$"
)
_ENV_LINE = r"(?:export\s+)?[A-Za-z_][A-Za-z0-9_]*\s*=.*"


def is_placeholder_key(value: str) -> bool:
    """A key copied from a guide (`sk-ant-...`, `<your key>`, `xxxx`), not a real one."""
    return bool(re.search(_PLACEHOLDER_KEY, value.strip()))


def env_file_lines_unread(text: str) -> list[int]:
    """The 1-based lines of an env file that `read_env_file` cannot read as `KEY=VALUE`
    (blank lines and `#` comments are fine): they are silently ignored, so doctor names them."""
    return [
        n
        for n, line in enumerate(text.splitlines(), 1)
        if line.strip()
        and not line.strip().startswith("#")
        and not re.fullmatch(_ENV_LINE, line.strip())
    ]


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines; `export `, quotes and `#` comments are allowed."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read the env file ({e}); fix or remove it.") from None
    values = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.removeprefix("export ").partition("=")
        values[key.strip()] = value.strip().strip("'\"")
    return values
