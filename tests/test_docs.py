"""The guides in docs/ cannot drift from the tool: their commands run and their snippets load.

Every `$ ` line of every ```console block of every docs/*.md runs, in order per guide, in one
bash, in a sandbox: HOME is a tmp folder holding a fake OpenClaw workspace and transcripts copied
from tests/fixtures, and stand-ins for `crontab`, `claude` and `openclaw` come first on PATH, so
`crustacean cron install` never touches the real crontab. There is no API key, and every HTTP
proxy points at a closed port, so a model call could never leave the machine. A new guide is
covered by being there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from crustacean.config import SECTIONS, load_config
from crustacean.ops.init import init_workspace

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
GUIDES = sorted(DOCS.glob("*.md"))
BIN = Path(sys.executable).parent
FIXTURES = REPO / "tests/fixtures/transcripts"
FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
STEP = "@@docs-step"
EXIT_ECHO = 'echo "exit code $?"'
DEAD_PROXY = "http://127.0.0.1:9"

CRONTAB = """#!/bin/sh
# A stand-in crontab: keeps the table in $FAKE_CRONTAB, never in the system's.
case "$1" in
  -l) [ -f "$FAKE_CRONTAB" ] || { echo "no crontab for $(id -un)" >&2; exit 1; }
      cat "$FAKE_CRONTAB" ;;
  -) cat > "$FAKE_CRONTAB" ;;
  *) echo "fake crontab: unsupported: $*" >&2; exit 2 ;;
esac
"""
STUB = f"""#!{sys.executable}
# A stand-in for a program the guides tell the reader to run: it records its argv and succeeds.
import json, os, sys
with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""


@dataclass(frozen=True)
class Sandbox:
    home: Path
    env: dict[str, str]

    def stub_calls(self) -> list[list[str]]:
        log = Path(self.env["STUB_LOG"])
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@dataclass(frozen=True)
class Step:
    command: str
    output: str


def blocks(path: Path) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return FENCE.findall(path.read_text("utf-8"))


def commands(body: str) -> list[str]:
    return [line[2:] for line in body.splitlines() if line.startswith("$ ")]


def guide_commands(path: Path) -> list[str]:
    return [c for lang, body in blocks(path) if lang == "console" for c in commands(body)]


def make_sandbox(tmp: Path) -> Sandbox:
    """A HOME like an OpenClaw and Claude Code user's, with stand-in programs first on PATH."""
    home = tmp / "home"
    ws = home / ".openclaw/workspace"
    (ws / "memory").mkdir(parents=True)
    shutil.copytree(FIXTURES / "openclaw/agents", home / ".openclaw/agents")
    shutil.copytree(FIXTURES / "claude/projects", home / ".claude/projects")
    (home / ".openclaw/openclaw.json").write_text(
        '{"agents": {"defaults": {"workspace": "~/.openclaw/workspace"}}}\n'
    )
    (ws / "MEMORY.md").write_text("# MEMORY.md\n\n## Hot\n\n- Maya plans Mum's 70th dinner.\n")
    (ws / "SOUL.md").write_text("# SOUL.md\n\nI am warm, brief and honest.\n")
    (ws / "AGENTS.md").write_text("# AGENTS.md\n\nRead SOUL.md and USER.md first.\n")
    (ws / "memory/2026-11-25.md").write_text("# 2026-11-25\n\n- Book the restaurant.\n")
    (ws / "memory/2026-11-24-call-ana.md").write_text(  # a session-memory hook file
        "# Session: 2026-11-24 07:41:55 UTC\n\n## Conversation Summary\n\nuser: call Ana\n"
    )
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for name, text in (("crontab", CRONTAB), ("claude", STUB), ("openclaw", STUB)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CRUSTACEAN_", "ANTHROPIC_", "XDG_")) and "PROXY" not in k.upper()
    }
    env.update(
        HOME=str(home),
        PATH=f"{bin_dir}:{BIN}:{os.environ['PATH']}",
        CRUSTACEAN_CONFIG_DIR=str(home / ".config/crustacean"),
        FAKE_CRONTAB=str(tmp / "crontab"),
        STUB_LOG=str(tmp / "stub-calls.jsonl"),
        HTTP_PROXY=DEAD_PROXY,
        HTTPS_PROXY=DEAD_PROXY,
        ALL_PROXY=DEAD_PROXY,
        NO_PROXY="127.0.0.1,localhost",
        TZ="UTC",
        NO_COLOR="1",
        TERM="dumb",
        COLUMNS="100",
        GIT_CONFIG_NOSYSTEM="1",
    )
    return Sandbox(home, env)


# The guides say "replace sk-ant-... with your key"; the sandbox does, as its reader would
# (doctor refuses the placeholder itself).
YOUR_KEY = "sk-ant-api03-" + "G" * 86 + "-AAAA"


def run_steps(box: Sandbox, cmds: list[str], name: str) -> list[Step]:
    """Run the commands in one bash (so `cd` carries over); stop at the first that fails."""
    script = ["exec 2>&1", "set -o pipefail"]
    for i, cmd in enumerate(cmds):
        script += [
            f"printf '\\n{STEP} {i}\\n'",
            cmd.replace("=sk-ant-...", f"={YOUR_KEY}"),
            f"rc=$?; [ $rc -eq 0 ] || {{ printf '\\n{STEP} failed %s\\n' $rc; exit 1; }}",
        ]
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", "\n".join(script)],
        cwd=box.home,
        env=box.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    parts = re.split(rf"\n{STEP} (\d+|failed \d+)\n", "\n" + done.stdout)
    outputs = dict(zip(parts[1::2], parts[2::2], strict=True))
    steps = [Step(c, outputs.get(str(i), "")) for i, c in enumerate(cmds)]
    if done.returncode != 0:
        ran = [s for i, s in enumerate(steps) if str(i) in outputs]
        last = ran[-1] if ran else Step("(none)", done.stdout)
        raise AssertionError(f"{name}: `{last.command}` failed:\n{last.output}\n{done.stderr}")
    return steps


def expected_exit_codes(path: Path) -> list[tuple[list[int], list[int]]]:
    """For each console block with `echo "exit code $?"` steps: their indexes among the guide's
    commands, and the codes the next fenced (text) block says they print."""
    found = []
    bs = blocks(path)
    index = 0
    for i, (lang, body) in enumerate(bs):
        if lang != "console":
            continue
        cmds = commands(body)
        echoing = [index + k for k, c in enumerate(cmds) if c.endswith(EXIT_ECHO)]
        index += len(cmds)
        if echoing:
            after = bs[i + 1][1] if i + 1 < len(bs) else ""
            found.append((echoing, [int(c) for c in re.findall(r"^exit code (\d+)$", after, re.M)]))
    return found


# ------------------------------------------------------------------ the commands run


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_console_blocks_hold_only_commands(guide: Path) -> None:
    """Output examples go in ```text blocks, so a console block is all runnable `$ ` lines."""
    for lang, body in blocks(guide):
        if lang == "console":
            stray = [ln for ln in body.splitlines() if ln.strip() and not ln.startswith("$ ")]
            assert not stray, f"{guide.name}: not a `$ ` command in a console block: {stray}"
            assert not any(c.rstrip().endswith("\\") for c in commands(body)), guide.name


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_guide_commands_run_in_order(guide: Path, tmp_path: Path) -> None:
    cmds = guide_commands(guide)
    if not cmds:
        return  # a reference page (docs/cli.md, docs/configuration.md) has nothing to run
    if any(c.startswith("flock ") for c in cmds) and shutil.which("flock") is None:
        pytest.skip("the guide demonstrates the run lock with util-linux `flock`, missing here")
    box = make_sandbox(tmp_path)
    steps = run_steps(box, cmds, guide.name)
    for echoing, codes in expected_exit_codes(guide):
        printed = [int(re.findall(r"exit code (\d+)", steps[i].output)[-1]) for i in echoing]
        assert printed == codes, (guide.name, [steps[i] for i in echoing])
    for call in box.stub_calls():
        if call[:3] == ["claude", "mcp", "add"]:
            _check_mcp_server(box, call[call.index("--") + 1 :])


def _check_mcp_server(box: Sandbox, argv: list[str]) -> None:
    """A registered server command really serves crustacean's tools."""
    done = subprocess.run(
        [*argv, "--print-tools"], env=box.env, cwd=box.home, capture_output=True, text=True
    )
    assert done.returncode == 0, (argv, done.stderr)
    assert [t["name"] for t in json.loads(done.stdout)][-1] == "get_context"


# ------------------------------------------------------------------ snippets


def _snippets(lang: str) -> list[tuple[str, str]]:
    """The guides' snippets, and the README's: every page a user copies configuration from."""
    pages = [*GUIDES, REPO / "README.md"]
    return [(g.name, body) for g in pages for la, body in blocks(g) if la == lang]


def _is_crustacean_config(data: dict[str, Any]) -> bool:
    return bool(data) and all(k in SECTIONS or k == "sources" for k in data)


@pytest.mark.parametrize("name, body", _snippets("toml"), ids=lambda v: str(v)[:24])
def test_toml_snippets_load(name: str, body: str, tmp_path: Path) -> None:
    """Every TOML snippet parses; crustacean config loads as a workspace (or org) file."""
    data = tomllib.loads(body)
    if not _is_crustacean_config(data):
        return
    env = {"CRUSTACEAN_CONFIG_DIR": str(tmp_path / "userconfig")}
    if "governance" in data:  # read only from the org file
        org = tmp_path / "org.toml"
        org.write_text(body)
        env["CRUSTACEAN_ORG_CONFIG"] = str(org)
    else:
        (tmp_path / "crustacean.toml").write_text(body)
    loaded = load_config(tmp_path, env=env)
    assert not loaded.warnings, (name, loaded.warnings)


@pytest.mark.parametrize("name, body", _snippets("json"), ids=lambda v: str(v)[:24])
def test_json_snippets_parse(name: str, body: str) -> None:
    json.loads(body)


def _json_with(*keys: str) -> list[dict[str, Any]]:
    """The JSON snippets that hold the nested key path `keys`; at least one must."""
    out = []
    for _, body in _snippets("json"):
        data = json.loads(body)
        node = data
        for key in keys:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            out.append(data)
    assert out, f"no guide shows a JSON snippet with {'.'.join(keys)}"
    return out


def _sandbox_with(tmp_path: Path, folder: str) -> Sandbox:
    """A sandbox whose HOME holds an initialized workspace at `folder`."""
    box = make_sandbox(tmp_path)
    init_workspace(box.home / folder, detect=False)
    return box


def _bash(box: Sandbox, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], env=box.env, cwd=box.home, capture_output=True, text=True
    )


def test_the_claude_hook_snippets_print_hook_json(tmp_path: Path) -> None:
    box = _sandbox_with(tmp_path, "agent")
    for settings in _json_with("hooks", "SessionStart"):
        (hook,) = settings["hooks"]["SessionStart"]
        assert hook["matcher"] == "startup|resume|clear|compact"
        done = _bash(box, hook["hooks"][0]["command"])
        assert done.returncode == 0, done.stdout + done.stderr
        out = json.loads(done.stdout)["hookSpecificOutput"]
        assert out["hookEventName"] == "SessionStart" and "SOUL.md" in out["additionalContext"]


def test_the_precompact_snippet_collects_the_session(tmp_path: Path) -> None:
    from crustacean.config import SourceConfig

    box = make_sandbox(tmp_path)
    init_workspace(
        box.home / "agent",
        sources=[SourceConfig(kind="claude_code", path="~/.claude/projects")],  # as init adds it
    )
    (settings,) = _json_with("hooks", "PreCompact")
    (pre,) = settings["hooks"]["PreCompact"]
    assert pre["matcher"] == "manual|auto"
    assert "compact" in settings["hooks"]["SessionStart"][0]["matcher"]
    done = _bash(box, pre["hooks"][0]["command"] + " --plan")  # the same run, no model call
    assert done.returncode == 0, done.stdout + done.stderr
    assert "new message(s)" in done.stdout


def test_the_mcp_server_snippets_serve_the_tools(tmp_path: Path) -> None:
    box = _sandbox_with(tmp_path, "agent")
    for data in _json_with("mcpServers", "crustacean"):
        server = data["mcpServers"]["crustacean"]
        _check_mcp_server(box, [server["command"], *server["args"]])  # no shell: no ~ expansion


def _doctor_findings(box: Sandbox, config: dict[str, Any]) -> dict[str, str]:
    (box.home / ".openclaw/openclaw.json").write_text(json.dumps(config))
    done = _bash(box, "crustacean -w ~/.openclaw/workspace doctor --json")
    return {c["name"]: c["status"] for c in json.loads(done.stdout)["checks"]}


def test_the_memory_search_snippet_satisfies_doctor(tmp_path: Path) -> None:
    box = _sandbox_with(tmp_path, ".openclaw/workspace")
    for config in _json_with("agents", "defaults", "memorySearch", "extraPaths"):
        assert _doctor_findings(box, config)["openclaw memorySearch"] == "ok"


def test_the_dreaming_snippet_turns_dreaming_off() -> None:
    (config,) = _json_with("plugins", "entries", "memory-core", "config", "dreaming")
    assert config["plugins"]["entries"]["memory-core"]["config"]["dreaming"] == {"enabled": False}


def test_doctor_sees_dreaming_turned_off(tmp_path: Path) -> None:
    (config,) = _json_with("plugins", "entries", "memory-core", "config", "dreaming")
    box = _sandbox_with(tmp_path, ".openclaw/workspace")
    assert "openclaw dreaming" not in _doctor_findings(box, config)


# ------------------------------------------------------------------ tables that mirror code


def policy_table() -> str:
    """The store's POLICY as docs/safety.md shows it."""
    from crustacean.store.policy import ACTORS, DAILY, MODES, POLICY
    from crustacean.workspace import MEMORY_SUBDIRS

    homes = [f"memory/{d}/**" for d in MEMORY_SUBDIRS]

    def where(globs: tuple[str, ...]) -> str:
        shown = list(globs)
        if all(h in shown for h in homes):
            at = shown.index(homes[0])
            shown = [g for g in shown if g not in homes]
            shown.insert(at, "memory/{" + ",".join(MEMORY_SUBDIRS) + "}/**")
        return ", ".join(f"`{g}`" for g in shown).replace(DAILY, "<daily>/YYYY-MM-DD.md")

    rows = ["| actor | may | where |", "|---|---|---|"]
    for actor in ACTORS:
        if actor not in POLICY:
            rows.append(f"| {actor} | {', '.join(MODES)} | anywhere in the workspace |")
        for modes, globs in POLICY.get(actor, ()):
            may = "move files into" if modes == {"move_to"} else ""
            may = may or ", ".join(m for m in MODES if m in modes)
            rows.append(f"| {actor} | {may} | {where(globs)} |")
    return "\n".join(rows) + "\n"


def test_the_policy_table_in_safety_md_is_the_code() -> None:
    text = (DOCS / "safety.md").read_text("utf-8")
    assert policy_table() in text, "regenerate it with tests/test_docs.py:policy_table()"


def test_every_environment_variable_is_documented() -> None:
    text = (DOCS / "exit-codes-and-env.md").read_text("utf-8")
    source = "\n".join(p.read_text("utf-8") for p in (REPO / "crustacean").rglob("*.py"))
    names = set(re.findall(r"\"((?:CRUSTACEAN|ANTHROPIC)_[A-Z][A-Z_]*[A-Z])\"", source))
    names |= set(re.findall(r"(?:environ|env)\.get\(\"([A-Z][A-Z_]*)\"", source))
    assert names >= {"CRUSTACEAN_WORKSPACE", "ANTHROPIC_API_KEY", "HOME"}
    missing = sorted(n for n in names if f"`{n}`" not in text)
    assert not missing, f"docs/exit-codes-and-env.md does not explain {missing}"


def test_every_exit_code_is_documented() -> None:
    from crustacean import errors

    text = (DOCS / "exit-codes-and-env.md").read_text("utf-8")
    codes = {v for k, v in vars(errors).items() if k.startswith("EXIT_")}
    assert codes == {0, 1, 2, 75, 130}
    for code in codes:
        assert re.search(rf"^\| {code} \|", text, re.M), code
        assert f"exit code {code}\n" in text, f"no example of exit code {code}"
