"""Spot credentials in text before the store writes it or anything sends it to a model.

Memory notes are prose that is re-read by models and may be synced or shared, so a pasted key
would leak for good. This module only detects (and can redact); the caller decides to refuse.

Detection is Yelp's detect-secrets (its provider detectors: AWS, Azure storage, Discord, GitHub,
GitLab, npm, OpenAI, PyPI, SendGrid, Slack, Stripe, Telegram, Twilio, Mailchimp, Square, private
keys, URL passwords, JWTs), plus rules here for what it lacks (Anthropic, Hugging Face, Google
OAuth and API keys, bare npm tokens, Brave, Composio, `redis://:pw@`, whole PEM blocks, keys in
`name = value` assignments and hex tokens named as such in prose). Its generic entropy and
keyword detectors are left out: they flag the sha256 digests and commit ids the store itself
writes.

It runs on every write and every transcript line, so a pre-filter of literal hints decides
which detectors run at all, and detect-secrets (and its imports) load only when a hint matches.
Precision matters as much as recall: prose that merely mentions "password" or "token", hex
digests, commit ids, UUIDs and placeholders must pass untouched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class SecretFinding:
    """Where a secret is and what kind; never the value, so it is safe to log or show."""

    kind: str
    line: int


Span = tuple[int, int]

_KW = r"(?:password|passwd|pwd|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key)"
_PEM_HEAD = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_TAIL = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
# A random value has a digit and a letter; prose words, slugs and sentences rarely do both.
_RANDOM = r"(?=[A-Za-z_-]*\d)(?=[\d_-]*[A-Za-z])"
_RANDOM_RX = re.compile(r"(?=.*\d)(?=.*[A-Za-z])|.*[^\w-]", re.DOTALL)  # or has a symbol

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
# Words before a hex string that make it a digest or an id, not a credential.
_DIGEST_WORDS = re.compile(r"(?i)sha\d*|hash|digest|checksum|fingerprint|commit|etag|\bid\b|uuid")


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


def _is_hex_token(m: re.Match[str]) -> bool:
    """A hex string named a token in prose, unless the words just before call it a digest."""
    return not _DIGEST_WORDS.search(m.string[max(0, m.start("v") - 60) : m.start("v")])


@dataclass(frozen=True)
class _Rule:
    """One detector: the literal hints (lower-case) that must occur for it to run, and how it
    finds spans. A rule with `pre` runs only where that cheap regex matches instead."""

    kind: str
    hints: tuple[str, ...]
    find: Callable[[str], Iterator[Span]]
    pre: re.Pattern[str] | None = None


def _regex(
    pattern: str, judge: Callable[[re.Match[str]], bool] | None = None
) -> Callable[[str], Iterator[Span]]:
    """Spans of a pattern's `v` group (or the whole match), minus placeholders and `judge`'s no."""
    rx = re.compile(pattern)
    group = "v" if "v" in rx.groupindex else 0

    def find(text: str) -> Iterator[Span]:
        for m in rx.finditer(text):
            if _PLACEHOLDER.search(m[group]) or (judge and not judge(m)):
                continue
            yield m.span(group)

    return find


def _mixed_case_after_colon(value: str) -> bool:
    """A Telegram token's secret half is random base64; a slug after `12345678:` is not."""
    tail = value.partition(":")[2]
    return tail.lower() != tail and tail.upper() != tail


def _pem(text: str) -> Iterator[Span]:
    rx = _compiled(rf"{_PEM_HEAD}(?:(?:(?!-----)[\s\S])*{_PEM_TAIL}|(?:\s+[\w+/=]{{16,}})*)")
    for m in rx.finditer(text):
        yield m.span()


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@cache
def _plugin(name: str) -> Any:
    """One detect-secrets detector, imported on first use (the package pulls in requests)."""
    from detect_secrets.plugins import (
        aws,
        azure_storage_key,
        basic_auth,
        discord,
        github_token,
        gitlab_token,
        jwt,
        mailchimp,
        npm,
        openai,
        private_key,
        pypi_token,
        sendgrid,
        slack,
        square_oauth,
        stripe,
        telegram_token,
        twilio,
    )

    modules: tuple[ModuleType, ...] = (aws, azure_storage_key, basic_auth, discord, github_token)
    modules += (gitlab_token, jwt)
    modules += (mailchimp, npm, openai, private_key, pypi_token, sendgrid, slack, square_oauth)
    modules += (stripe, telegram_token, twilio)
    for module in modules:
        if hasattr(module, name):
            return getattr(module, name)()
    raise LookupError(f"detect-secrets has no detector {name}; pin a version that has it")


def _library(
    name: str, value_group: bool = False, accept: Callable[[str], bool] | None = None
) -> Callable[[str], Iterator[Span]]:
    """Spans of what a detect-secrets detector reports. It yields values (for some detectors a
    captured prefix), not places, so its own patterns place each match and its `analyze_string`
    (with the detector's extra checks, such as a JWT's JSON) must accept the match.
    `value_group`: redact the detector's captured group (a URL's password) instead of the match;
    `accept`: a further check of the value, for detectors without a fixed prefix."""

    def find(text: str) -> Iterator[Span]:
        plugin = _plugin(name)
        for rx in plugin.denylist:
            for m in rx.finditer(text):
                groups = [i for i in range(1, (rx.groups or 0) + 1) if m[i]]
                span = m.span(groups[-1]) if value_group and groups else m.span()
                value = text[span[0] : span[1]]
                if not value or _PLACEHOLDER.search(value) or not _RANDOM_RX.match(value):
                    continue
                if accept is not None and not accept(value):
                    continue
                if next(iter(plugin.analyze_string(m[0])), None) is not None:
                    yield span

    return find


_GITLAB_PREFIXES: tuple[str, ...] = (
    "glpat-",
    "gldt-",
    "glft-",
    "glsoat-",
    "glrt-",
    "gr1348941",
    "glcbt-",
)
_GITLAB_PREFIXES += ("glimt-", "glptt-", "glagent-", "gloas-")

# Ordered most specific first: where two matches overlap, the earlier rule wins.
_RULES: tuple[_Rule, ...] = (
    _Rule("private key block", ("-----BEGIN",), _pem),
    _Rule(
        "private key block",
        ("private key", "putty-user-key"),
        _library("PrivateKeyDetector"),
    ),
    _Rule("Anthropic API key", ("sk-ant-",), _regex(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    _Rule("OpenAI API key", ("t3blbkfj",), _library("OpenAIDetector")),
    _Rule(
        "OpenAI API key",
        ("sk-",),
        _regex(r"\bsk-(?!ant-)(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{32,}"),
    ),
    _Rule(
        "AWS secret access key",
        ("secret",),
        _regex(
            r"(?i:aws_?secret_?access_?key)[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"
        ),
    ),
    _Rule(
        "AWS access key id",
        ("akia", "asia", "abia", "acca", "a3t", "aws"),
        _library("AWSKeyDetector", value_group=True),
    ),
    _Rule("Azure storage key", ("accountkey=",), _library("AzureStorageKeyDetector")),
    _Rule(
        "GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _regex(r"\b(?:gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9])|github_pat_\w{22,})"),
    ),
    _Rule(
        "GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _library("GitHubTokenDetector")
    ),
    _Rule(
        "GitLab token",
        _GITLAB_PREFIXES,
        _library("GitLabTokenDetector"),
    ),
    _Rule("Hugging Face token", ("hf_",), _regex(rf"\bhf_{_RANDOM}[A-Za-z0-9]{{30,}}(?![\w-])")),
    _Rule("npm token", ("_authtoken",), _library("NpmDetector", value_group=True)),
    _Rule("npm token", ("npm_",), _regex(r"\bnpm_[A-Za-z0-9]{36}(?![\w-])")),
    _Rule("PyPI token", ("pypi-ag",), _library("PypiTokenDetector")),
    _Rule("Google OAuth token", ("ya29.",), _regex(r"\bya29\.[\w-]{20,}")),
    _Rule("Google API key", ("aiza",), _regex(r"\bAIza[\w-]{35}(?![\w-])")),
    _Rule(
        "Slack webhook URL",
        ("hooks.slack.com",),
        _regex(r"https://hooks\.slack\.com/(?:services|workflows)/[\w/-]{20,}"),
    ),
    _Rule("Slack token", ("xox",), _regex(r"\bxox[baprs]-(?=[A-Za-z0-9-]*\d)[A-Za-z0-9-]{10,}")),
    _Rule("Slack token", ("xox",), _library("SlackDetector")),
    _Rule("Stripe key", ("k_live_", "k_test_"), _regex(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    _Rule("Stripe key", ("k_live_",), _library("StripeDetector")),
    _Rule("SendGrid API key", ("sg.",), _library("SendGridDetector")),
    _Rule("Square OAuth secret", ("sq0csp-",), _library("SquareOAuthDetector")),
    _Rule("Mailchimp API key", ("-us",), _library("MailchimpDetector")),
    _Rule(
        "Telegram bot token",
        (),
        _library("TelegramBotTokenDetector", accept=_mixed_case_after_colon),
        pre=re.compile(r"\d{8}:[\w-]{30}"),
    ),
    _Rule(
        "Discord bot token",
        (),
        _library("DiscordBotTokenDetector"),
        pre=re.compile(r"[MNO][\w-]{23,25}\.[\w-]{6}\."),
    ),
    _Rule(
        "Twilio key",
        (),
        _library("TwilioKeyDetector"),
        pre=re.compile(r"(?:AC|SK)[a-z0-9]{32}"),
    ),
    _Rule("Brave API key", ("bsa",), _regex(rf"\bBSA{_RANDOM}[\w-]{{25,32}}(?![\w-])")),
    _Rule("Composio API key", ("ak_",), _regex(rf"\bu?ak_{_RANDOM}[\w-]{{16,40}}(?![\w-])")),
    _Rule("JWT", ("eyj",), _regex(r"\beyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,}")),
    _Rule("JWT", ("eyj",), _library("JwtTokenDetector")),
    _Rule("URL credentials", ("://",), _library("BasicAuthDetector", value_group=True)),
    _Rule(
        "URL credentials",
        ("://",),
        _regex(r"\b[A-Za-z][\w+.-]{0,20}://[^\s:/@\"'<>]*:(?P<v>[^\s:/@\"'<>]+)@"),
    ),
    _Rule(
        "bearer token",
        ("bearer",),
        _regex(r"(?i:\bbearer)[ \t]+(?P<v>(?=[\w.~+/-]*\d)[\w.~+/-]{20,}=*)"),
    ),
    _Rule(
        "credential assignment",
        ("pass", "pwd", "secret", "token", "key"),
        _regex(
            rf"(?i)(?<![\w.-])(?P<key>[\w.-]{{0,40}}?{_KW}(?![a-z])[\w.-]{{0,40}})[*\"'`]{{0,2}}"
            r"[ \t]*(?P<sep>:=|[:=])[ \t*]*(?P<q>[\"'`]?)(?P<v>[^\s\"'`]{6,})(?P=q)",
            _is_assigned_secret,
        ),
    ),
    _Rule(
        "hex token",
        ("token", "key", "secret", "pass", "auth", "credential"),
        _regex(
            r"(?i)\b[\w-]{0,20}?(?:token|key|secret|passw\w*|auth\w*|credential)s?\b"
            r"[^\n]{0,40}?(?<![\w-])(?P<v>(?=[a-f]*\d)(?=\d*[a-f])[0-9a-f]{32,}|"
            r"(?=[A-F]*\d)(?=\d*[A-F])[0-9A-F]{32,})(?![\w-])",
            _is_hex_token,
        ),
    ),
)


# The pre-filter, per line. One regex (a trie of every hint) over the lower-cased line says
# whether any hint occurs at all, and three cheap ones whether a prefix-less detector could
# match: most lines hold neither and cost those scans instead of thirty detectors. Otherwise a
# rule runs only if one of its own hints is in the line (an exact substring test, so
# overlapping hints never hide each other). Only a PEM block spans lines; it is found first.


def _trie(words: list[str]) -> str:
    """A regex matching where any of `words` starts (a hint that is a prefix of another
    suffices); a trie, because sre tries every branch of a flat alternation at each position."""
    by: dict[str, list[str]] = {}
    for w in words:
        by.setdefault(w[0], []).append(w[1:])
    parts = [
        re.escape(c) + ("" if "" in tails else _trie(tails)) for c, tails in sorted(by.items())
    ]
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


_ANY_HINT = re.compile(_trie(sorted({h for r in _RULES[1:] for h in r.hints})))
_PREFIXLESS = tuple(r for r in _RULES if r.pre is not None)
_LINE_RULES = _RULES[1:]  # _RULES[0], the PEM block, is the one that spans lines


def _wanted(line: str) -> list[_Rule]:
    """The rules the pre-filter lets run on one line, in rule order."""
    low = line.lower()
    if _ANY_HINT.search(low) is None:
        return [r for r in _PREFIXLESS if r.pre and r.pre.search(line)]
    return [
        r
        for r in _LINE_RULES
        if (r.pre.search(line) if r.pre is not None else any(h in low for h in r.hints))
    ]


def _scan(text: str) -> list[tuple[int, int, str]]:
    """Return non-overlapping (start, end, kind) spans of secret values, in text order."""
    pem = _RULES[0]
    spans = [(s, e, pem.kind) for s, e in pem.find(text)] if "-----BEGIN" in text else []
    offset = 0
    for line in text.split("\n"):
        for rule in _wanted(line):
            for start, end in rule.find(line):
                start, end = start + offset, end + offset
                if all(end <= s or start >= e for s, e, _ in spans):
                    spans.append((start, end, rule.kind))
        offset += len(line) + 1
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
