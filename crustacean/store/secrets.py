"""Spot credentials in text before the store writes it.

Memory notes are prose that is re-read by models and may be synced or shared, so a pasted key
would leak for good. This module only detects (and can redact); the caller decides to refuse.
It runs on every write, so precision matters as much as recall: prose that merely mentions
"password" or "token", hex digests, commit ids, UUIDs and placeholders must pass untouched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class SecretFinding:
    """Where a secret is and what kind; never the value, so it is safe to log or show."""

    kind: str
    line: int


_KW = r"(?:password|passwd|pwd|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key)"
_PEM_HEAD = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_TAIL = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"

# Ordered most specific first: where two matches overlap, the earlier rule wins.
# A named group `v` marks the part to redact; without it the whole match is the secret.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern))
    for kind, pattern in (
        (
            "private key block",
            rf"{_PEM_HEAD}(?:(?:(?!-----)[\s\S])*{_PEM_TAIL}|(?:\s+[\w+/=]{{16,}})*)",
        ),
        ("Anthropic API key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        ("OpenAI API key", r"\bsk-(?!ant-)(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{32,}"),
        ("AWS access key id", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
        (
            "AWS secret access key",
            r"(?i:aws_?secret_?access_?key)[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        ),
        ("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9])|github_pat_\w{22,})"),
        ("Slack webhook URL", r"https://hooks\.slack\.com/(?:services|workflows)/[\w/-]{20,}"),
        ("Slack token", r"\bxox[baprs]-(?=[A-Za-z0-9-]*\d)[A-Za-z0-9-]{10,}"),
        ("Stripe key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        ("Google API key", r"\bAIza[\w-]{35}(?![\w-])"),
        ("JWT", r"\beyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,}"),
        ("URL credentials", r"\b[A-Za-z][\w+.-]{0,20}://[^\s:/@\"'<>]+:(?P<v>[^\s:/@\"'<>]+)@"),
        ("bearer token", r"(?i:\bbearer)[ \t]+(?P<v>(?=[\w.~+/-]*\d)[\w.~+/-]{20,}=*)"),
        (
            "credential assignment",
            rf"(?i)(?<![\w.-])(?P<key>[\w.-]{{0,40}}?{_KW}(?![a-z])[\w.-]{{0,40}})[*\"'`]{{0,2}}"
            r"[ \t]*(?P<sep>:=|[:=])[ \t*]*(?P<q>[\"'`]?)(?P<v>[^\s\"'`]{6,})(?P=q)",
        ),
    )
)

# Obvious stand-ins: <your-key>, ***, ${VAR}, $VAR, {var}, xxxx, ..., changeme, REDACTED, examples.
_PLACEHOLDER = re.compile(
    r"(?i)x{4,}|\*{3,}|\.{3}|…|redacted|example|changeme|placeholder|your[_-]|<[^>]*>"
    r"|^\$|\$\{|\{[\w.]*\}|%\(\w+\)s|^%\w+%$|^(?:password|passwd|secret|token|none|null|undefined)$"
)
# Keys that name data *about* a credential (its hash, file, id, length, budget...), not one.
_META_KEY = re.compile(
    r"(?i)(?:^|[_.-])(?:id|count|limit|budget|type|url|uri|file|path|dir|name|hash|sha\d*"
    r"|digest|checksum|fingerprint|len|length|ttl|policy|min|max|size|env|var"
    r"|md|txt|json|ya?ml|toml|log|py)(?:$|[_.-])"  # a file name ("token-notes.md: ...") is no key
)
# Values that point at a secret instead of holding one: calls, subscripts, attribute paths,
# snake_case names (`api_key=api_key`), file paths, URLs and plain numbers (`max_tokens: 4000`).
_REFERENCE = re.compile(
    r"[A-Za-z_][\w.]*[(\[].*|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+|[A-Za-z]+(?:_[A-Za-z]+)+"
    r"|(?:~|\.{1,2})?/.*|[A-Za-z][\w+.-]*://.*|[\d,._]+"
)
_PLAIN_WORD = re.compile(r"[A-Za-z][a-z]*(?:-[A-Za-z][a-z]*)*")
_DIGIT_OR_SYMBOL = re.compile(r"\d|[^\w-]")


def _is_assigned_secret(m: re.Match[str]) -> bool:
    """Judge `key = value`: prose says "password: go to settings", configs hold real values."""
    key, value = m["key"], m["v"]
    core = value.rstrip(".,;:!?)]}")
    if len(core) < 6 or _META_KEY.search(key) or _REFERENCE.fullmatch(core):
        return False
    if m["q"] or _DIGIT_OR_SYMBOL.search(core):
        return True
    config_style = m["sep"] != ":" or not key.isalpha() or key.isupper()
    return len(core) >= 12 and (config_style or not _PLAIN_WORD.fullmatch(core))


# Literal hints, lower-cased: a rule runs only when one occurs in the text. Every write and
# every transcript line is scanned, and most text holds none of these, so most scans are a few
# substring tests instead of fourteen regex passes.
_HINTS: dict[str, tuple[str, ...]] = {
    "private key block": ("-----begin",),
    "Anthropic API key": ("sk-ant-",),
    "OpenAI API key": ("sk-",),
    "AWS access key id": ("akia", "asia"),
    "AWS secret access key": ("secret",),
    "GitHub token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "Slack webhook URL": ("hooks.slack.com",),
    "Slack token": ("xox",),
    "Stripe key": ("k_live_", "k_test_"),
    "Google API key": ("aiza",),
    "JWT": ("eyj",),
    "URL credentials": ("://",),
    "bearer token": ("bearer",),
    "credential assignment": ("pass", "pwd", "secret", "token", "key"),
}


def _scan(text: str) -> list[tuple[int, int, str]]:
    """Return non-overlapping (start, end, kind) spans of secret values, in text order."""
    spans: list[tuple[int, int, str]] = []
    low = text.lower()
    for kind, pattern in _RULES:
        if not any(hint in low for hint in _HINTS[kind]):
            continue
        for m in pattern.finditer(text):
            group = "v" if "v" in pattern.groupindex else 0
            start, end = m.span(group)
            if kind != "private key block" and _PLACEHOLDER.search(m[group]):
                continue
            if kind == "credential assignment" and not _is_assigned_secret(m):
                continue
            if all(end <= s or start >= e for s, e, _ in spans):
                spans.append((start, end, kind))
    return sorted(spans)


def find_secrets(text: str) -> list[SecretFinding]:
    """List every credential-looking value in `text` with its 1-based line, in text order."""
    return [SecretFinding(kind, text.count("\n", 0, start) + 1) for start, _, kind in _scan(text)]


def redact(text: str) -> str:
    """Replace each detected secret value with `[REDACTED:<kind>]`, keeping the text around it."""
    out: list[str] = []
    last = 0
    for start, end, kind in _scan(text):
        out += [text[last:start], f"[REDACTED:{kind}]"]
        last = end
    return "".join([*out, text[last:]])
