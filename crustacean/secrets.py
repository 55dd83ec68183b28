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

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from typing import Any


@dataclass(frozen=True)
class SecretFinding:
    """Where a secret is and what kind; never the value, so it is safe to log or show."""

    kind: str
    line: int


Span = tuple[int, int]
TABLE_KIND = "password in a table"

_KW = r"(?:password|passwd|pwd|secret(?:[_-]?key)?|token|api[_-]?key|access[_-]?key)"
_PEM_HEAD = r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
_PEM_TAIL = r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"

# Obvious stand-ins, anywhere in a value: <your-key>, ***, ${VAR}, $VAR, {var}, xxxx, ...,
# and what `redact` left.
_STAND_IN = re.compile(
    r"(?i)redacted|\*{3,}|\.{3}|…|<[^>]*>|^\$|\$\{|\{[\w.]*\}|%\(\w+\)s|^%\w+%$"
    r"|^(?:password|passwd|secret|token|none|null|undefined)$"
)
# Stand-in words: a value made of them (`changeme`, `your_api_key_here`) or ending in one (AWS's
# documented `...EXAMPLE` keys) is a placeholder; `example` followed by ten random characters
# is a real password that happens to start with a word.
_X_RUN = re.compile(r"(?i)x{4,}")
_STAND_IN_WORD = re.compile(r"(?i)example|changeme|placeholder|your[_-]|dummy|sample")
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
# Names: words joined by separators (`hub_download`, `SKILL_LEVEL`), or one camelCase word.
_NAME_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|\d{1,4}")
_CAMEL = re.compile(r"(?:[A-Z]?[a-z]{2,})+\d{0,4}")
_SEPARATORS = re.compile(r"[_.-]+")


def _entropy(text: str) -> float:
    """Shannon entropy in bits per character: about log2(alphabet) for random text."""
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values()) if n else 0.0


def _is_name(text: str) -> bool:
    """Words a person named (`hub_download`, `getUserName`), as opposed to random characters."""
    parts = [p for p in _SEPARATORS.split(text) if p]
    if len(parts) > 1:
        return all(_NAME_PART.fullmatch(p) for p in parts)
    return bool(_CAMEL.fullmatch(text))


def _random(text: str) -> bool:
    """Judge a token's randomness by its entropy and length, not by the characters it uses
    (a Hugging Face token may have no digit, an AWS key id no digit either): random text of
    n characters has nearly log2(n) bits per character, repeats (`aB3aB3`) and names far less."""
    if len(text) < 8 or _is_name(text):
        return False
    return _entropy(text) >= min(3.0, math.log2(len(text)) - 1.5)


def _is_placeholder(value: str) -> bool:
    """A stand-in the writer meant to be filled in, not a value: a run of x's counts when it
    is a good part of it (`AKIA` + 16 x's), not four x's by chance inside a random token."""
    if _STAND_IN.search(value):
        return True
    xs = max((len(run) for run in _X_RUN.findall(value)), default=0)
    if xs >= 8 or xs * 4 >= len(value):
        return True
    if not _STAND_IN_WORD.search(value):
        return False
    rest = _STAND_IN_WORD.sub("", value)
    core = re.sub(r"[\W_]", "", rest)
    return (
        len(core) < 8
        or _is_name(rest.strip("_.-"))
        or _STAND_IN_WORD.search(value[-len("placeholder") :]) is not None
    )


def _is_assigned_secret(m: re.Match[str]) -> bool:
    """Judge `key = value`: prose says "password: go to settings", configs hold real values."""
    if _META_KEY.search(m["key"]):
        return False
    key = m["key"]
    config_style = m["sep"] != ":" or not key.isalpha() or key.isupper()
    return _is_secret_value(m["v"], quoted=bool(m["q"]), config_style=config_style)


def _is_secret_value(value: str, *, quoted: bool, config_style: bool) -> bool:
    """A value named a credential (by its key or its column) that holds one, not a reference
    to one or a plain word."""
    core = value.rstrip(".,;:!?)]}")
    if len(core) < 6 or _REFERENCE.fullmatch(core):
        return False
    if quoted or _DIGIT_OR_SYMBOL.search(core):
        return True
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
    """Spans of a pattern's `v` group (or the whole match), minus placeholders and `judge`'s no.
    A pattern with an `r` group (the random body after a fixed prefix) needs it `_random`."""
    rx = re.compile(pattern)
    group = "v" if "v" in rx.groupindex else 0
    body = "r" in rx.groupindex

    def find(text: str) -> Iterator[Span]:
        for m in rx.finditer(text):
            if _is_placeholder(m[group]) or (body and not _random(m["r"])):
                continue
            if judge and not judge(m):
                continue
            yield m.span(group)

    return find


def _mixed_case_after_colon(value: str) -> bool:
    """A Telegram token's secret half is random base64; a slug after `12345678:` is not."""
    tail = value.partition(":")[2]
    return tail.lower() != tail and tail.upper() != tail


_PEM = re.compile(rf"{_PEM_HEAD}(?:(?:(?!-----)[\s\S])*{_PEM_TAIL}|(?:\s+[\w+/=]{{16,}})*)")


def _pem(text: str) -> Iterator[Span]:
    for m in _PEM.finditer(text):
        yield m.span()


@cache
def _plugin(name: str) -> Any:
    """One detect-secrets detector, `module.Class` under `detect_secrets.plugins`, imported on
    first use (the package pulls in requests)."""
    from detect_secrets import plugins

    module, _, detector = name.partition(".")
    try:
        return getattr(import_module(f"{plugins.__name__}.{module}"), detector)()
    except (ImportError, AttributeError):
        raise LookupError(
            f"detect-secrets has no detector {name}; pin a version that has it"
        ) from None


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
                if not value or _is_placeholder(value) or not _random(value):
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


def _token(kind: str, hints: tuple[str, ...], pattern: str) -> _Rule:
    """A provider's token: a fixed prefix and an `r` body that must look random, standing
    alone (not inside a longer word, base64 blob or path)."""
    return _Rule(kind, hints, _regex(rf"(?<![\w-]){pattern}(?![\w+/=-])"))


# Prefixes base64 can hold by chance (`EAA`): not right after a base64 run and its `+` or `/`.
_NOT_IN_BASE64 = r"(?<![A-Za-z0-9]{8}[+/=])"


def _sas_signature(m: re.Match[str]) -> bool:
    """An Azure shared access signature: `sig=` in a URL that also says its service version."""
    return re.search(r"[?&]sv=\d{4}-\d\d-\d\d", m.string) is not None


def _curl_password(m: re.Match[str]) -> bool:
    """`curl -u user:pw`; `user:pass`, `$USER:$PASS` and `{{ ... }}` stand for one."""
    value = m["v"]
    return not re.fullmatch(r"(?i)pass(?:word)?|pwd|test|token|secret|\$.*|\{\{.*|\[.*\]", value)


# Ordered most specific first: where two matches overlap, the earlier rule wins. Prefixes and
# lengths are the providers' published formats, as the well-kept scanners list them.
_RULES: tuple[_Rule, ...] = (
    _Rule("private key block", ("-----BEGIN",), _pem),
    _Rule(
        "private key block",
        ("private key", "putty-user-key"),
        _library("private_key.PrivateKeyDetector"),
    ),
    _Rule("Anthropic API key", ("sk-ant-",), _regex(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    _token("OpenRouter API key", ("sk-or-",), r"sk-or-v1-(?P<r>[a-f0-9]{64})"),
    _Rule("OpenAI API key", ("t3blbkfj",), _library("openai.OpenAIDetector")),
    _Rule("OpenAI API key", ("sk-",), _regex(r"\bsk-(?!ant-)(?P<r>[A-Za-z0-9_-]{32,})")),
    _token("ElevenLabs API key", ("sk_",), r"sk_(?P<r>[a-f0-9]{48})"),
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
        ("akia", "asia", "abia", "acca", "a3t"),
        _regex(
            r"(?<![A-Za-z0-9])(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)(?P<r>[A-Z0-9]{16})(?![A-Za-z0-9])"
        ),
    ),
    _Rule(
        "AWS access key id",
        ("akia", "asia", "abia", "acca", "a3t", "aws"),
        _library("aws.AWSKeyDetector", value_group=True),
    ),
    _Rule(
        "Azure storage key", ("accountkey=",), _library("azure_storage_key.AzureStorageKeyDetector")
    ),
    _Rule(
        "Azure SAS token",
        ("sig=",),
        _regex(r"[?&]sig=(?P<v>(?P<r>[A-Za-z0-9%+/]{30,}(?:=|%3[Dd]){0,2}))", _sas_signature),
    ),
    _token("Azure AD client secret", ("q~",), r"(?P<r>[\w~.]{3}\dQ~[\w~.-]{31,34})"),
    _Rule(
        "GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _regex(r"\b(?:gh[pousr]_[A-Za-z0-9]{36}(?![A-Za-z0-9])|github_pat_\w{22,})"),
    ),
    _Rule(
        "GitHub token",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
        _library("github_token.GitHubTokenDetector"),
    ),
    _Rule("GitLab token", _GITLAB_PREFIXES, _library("gitlab_token.GitLabTokenDetector")),
    _token("Hugging Face token", ("hf_", "api_org_"), r"(?:hf|api_org)_(?P<r>[A-Za-z0-9]{30,})"),
    _Rule("npm token", ("_authtoken",), _library("npm.NpmDetector", value_group=True)),
    _Rule("npm token", ("npm_",), _regex(r"\bnpm_[A-Za-z0-9]{36}(?![\w-])")),
    _Rule("PyPI token", ("pypi-ag",), _library("pypi_token.PypiTokenDetector")),
    _Rule("Google OAuth token", ("ya29.",), _regex(r"\bya29\.[\w-]{20,}")),
    _Rule("Google API key", ("aiza",), _regex(r"\bAIza[\w-]{35}(?![\w-])")),
    _token("Google OAuth client secret", ("gocspx-",), r"GOCSPX-(?P<r>[\w-]{28})"),
    _Rule(
        "Slack webhook URL",
        ("hooks.slack.com",),
        _regex(r"https://hooks\.slack\.com/(?:services|workflows)/[\w/-]{20,}"),
    ),
    _token("Slack token", ("xapp-",), r"xapp-\d-(?P<r>[A-Z0-9]+-\d+-[A-Za-z0-9]+)"),
    _Rule("Slack token", ("xox",), _regex(r"(?<![\w-])xox[abeoprs]-(?P<r>[A-Za-z0-9-]{10,})")),
    _Rule("Slack token", ("xox",), _library("slack.SlackDetector")),
    _Rule("Stripe key", ("k_live_", "k_test_"), _regex(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}")),
    _Rule("Stripe key", ("k_live_",), _library("stripe.StripeDetector")),
    _token("Stripe key", ("whsec_",), r"whsec_(?P<r>[A-Za-z0-9]{32,})"),
    _Rule("SendGrid API key", ("sg.",), _library("sendgrid.SendGridDetector")),
    _Rule("Square OAuth secret", ("sq0csp-",), _library("square_oauth.SquareOAuthDetector")),
    _token("Square access token", ("sq0atp-",), r"sq0atp-(?P<r>[\w-]{22,60})"),
    _token("Square access token", ("eaaa",), _NOT_IN_BASE64 + r"EAAA(?P<r>[\w-]{60})"),
    _token("Facebook access token", ("eaa",), _NOT_IN_BASE64 + r"EAA(?P<r>[A-Za-z0-9]{100,})"),
    _Rule("Mailchimp API key", ("-us",), _library("mailchimp.MailchimpDetector")),
    _Rule(
        "Telegram bot token",
        (),
        _library("telegram_token.TelegramBotTokenDetector", accept=_mixed_case_after_colon),
        pre=re.compile(r"\d{8}:[\w-]{30}"),
    ),
    _Rule(
        "Discord bot token",
        (),
        _library("discord.DiscordBotTokenDetector"),
        pre=re.compile(r"[MNO][\w-]{23,25}\.[\w-]{6}\."),
    ),
    _Rule(
        "Discord webhook URL",
        ("/api/webhooks/",),
        _regex(
            r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/(?P<r>[\w-]{60,})"
        ),
    ),
    _Rule(
        "Twilio key",
        (),
        _library("twilio.TwilioKeyDetector"),
        pre=re.compile(r"(?:AC|SK)[a-z0-9]{32}"),
    ),
    _token("Brave API key", ("bsa",), r"BSA(?P<r>[\w-]{25,32})"),
    _token("Composio API key", ("ak_",), r"u?ak_(?P<r>[\w-]{16,40})"),
    _token("DigitalOcean token", ("_v1_",), r"do[opr]_v1_(?P<r>[a-f0-9]{64})"),
    _token(
        "Shopify token",
        ("shpat_", "shpca_", "shppa_", "shpss_"),
        r"shp(?:at|ca|pa|ss)_(?P<r>[a-fA-F0-9]{32})",
    ),
    _token("Groq API key", ("gsk_",), r"gsk_(?P<r>[A-Za-z0-9]{52})"),
    _token("Replicate API token", ("r8_",), r"r8_(?P<r>[A-Za-z0-9]{37})"),
    _token("Perplexity API key", ("pplx-",), r"pplx-(?P<r>[A-Za-z0-9]{48})"),
    _token("xAI API key", ("xai-",), r"xai-(?P<r>[A-Za-z0-9]{80})"),
    _token("Notion token", ("ntn_",), r"ntn_(?P<r>\d{11}[A-Za-z0-9]{35})"),
    _token("Notion token", ("secret_",), r"secret_(?P<r>[A-Za-z0-9]{43})"),
    _token("Linear API key", ("lin_api_",), r"lin_api_(?P<r>[A-Za-z0-9]{40})"),
    _token("Postman API key", ("pmak-",), r"PMAK-(?P<r>[a-f0-9]{24}-[a-f0-9]{34})"),
    _token("Docker Hub token", ("dckr_pat_",), r"dckr_pat_(?P<r>[\w-]{27})"),
    _token("Supabase token", ("sbp_",), r"sbp_(?P<r>[a-f0-9]{40})"),
    _token("Grafana token", ("glsa_",), r"glsa_(?P<r>[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})"),
    _token("Grafana token", ("glc_",), r"glc_(?P<r>[A-Za-z0-9+/]{32,400}={0,2})"),
    _token("Sentry token", ("sntrys_", "sntryu_"), r"sntry[su]_(?P<r>[\w+/=]{64,})"),
    _token("age secret key", ("age-secret-key-1",), r"AGE-SECRET-KEY-1(?P<r>[0-9A-Z]{58})"),
    _token("LangSmith API key", ("lsv2_",), r"lsv2_(?:pt|sk)_(?P<r>[a-f0-9]{32}_[a-f0-9]{10})"),
    _token(
        "Tailscale key",
        ("tskey-",),
        r"tskey-(?:auth|api|client|webhook|scim)-(?P<r>[A-Za-z0-9]+-[A-Za-z0-9]+)",
    ),
    _token("Figma token", ("figd_",), r"figd_(?P<r>[\w-]{40})"),
    _Rule(  # "pat" is in too many words to be a hint
        "Airtable token",
        (),
        _regex(r"(?<![\w-])pat[A-Za-z0-9]{14}\.(?P<r>[a-f0-9]{64})(?![\w-])"),
        pre=re.compile(r"pat[A-Za-z0-9]{14}\."),
    ),
    _token("Atlassian API token", ("atatt3",), r"ATATT3(?P<r>[\w=-]{180,})"),
    _token("Databricks token", ("dapi",), r"dapi(?P<r>[a-f0-9]{32})(?:-\d)?"),
    _token("Doppler token", ("dp.",), r"dp\.(?:pt|st|sa|ct|scim|audit)\.(?P<r>[A-Za-z0-9]{40,44})"),
    _token("Fly.io token", ("fo1_",), r"fo1_(?P<r>[\w-]{43})"),
    _token("1Password service account token", ("ops_eyj",), r"ops_(?P<r>eyJ[\w+/]{250,}={0,3})"),
    _token("Resend API key", ("re_",), r"re_(?P<r>[A-Za-z0-9]{8}_[A-Za-z0-9]{24})"),
    _token("Tavily API key", ("tvly-",), r"tvly-(?:dev-)?(?P<r>[A-Za-z0-9]{32})"),
    _token("Firecrawl API key", ("fc-",), r"fc-(?P<r>[a-f0-9]{32})"),
    _token("Mailgun API key", ("key-",), r"key-(?P<r>[a-f0-9]{32})"),
    _token("Mapbox token", ("sk.eyj",), r"sk\.(?P<r>eyJ[\w-]{50,}\.[\w-]{20,})"),
    _token("Heroku API key", ("hrku-",), r"HRKU-AA(?P<r>[\w-]{58})"),
    _token("Vault token", ("hvs.", "hvb."), r"hv[sb]\.(?P<r>[\w-]{90,120})"),
    _token("Dropbox token", ("sl.",), r"sl\.(?P<r>[\w-]{130,})"),
    _token(
        "Braintree token",
        ("$production$",),
        r"access_token\$production\$(?P<r>[a-z0-9]{16}\$[a-f0-9]{32})",
    ),
    _Rule("JWT", ("eyj",), _regex(r"\beyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,}")),
    _Rule("JWT", ("eyj",), _library("jwt.JwtTokenDetector")),
    _Rule("URL credentials", ("://",), _library("basic_auth.BasicAuthDetector", value_group=True)),
    _Rule(
        "URL credentials",
        ("://",),
        _regex(r"\b[A-Za-z][\w+.-]{0,20}://[^\s:/@\"'<>]*:(?P<v>[^\s:/@\"'<>]+)@"),
    ),
    _Rule(
        "curl password",
        ("curl",),
        _regex(
            r"\bcurl\b[^\n]*?[ \t](?:-u|--user)(?:=|[ \t]{1,5})(?P<q>[\"']?)[^\s:\"']*:"
            r"(?P<v>[^\s\"']{3,})(?P=q)(?!\S)",
            _curl_password,
        ),
    ),
    _Rule(
        "bearer token",
        ("bearer",),
        _regex(r"(?i:\bbearer)[ \t]+(?P<v>(?P<r>[\w.~+/-]{20,}=*))"),
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


# hint -> the indices (in _LINE_RULES) of the rules it wakes: one substring test per hint
_BY_HINT: dict[str, list[int]] = {}
for _i, _rule in enumerate(_LINE_RULES):
    for _hint in _rule.hints:
        _BY_HINT.setdefault(_hint, []).append(_i)
_PRE = tuple((i, r.pre) for i, r in enumerate(_LINE_RULES) if r.pre is not None)


def _wanted(line: str) -> list[_Rule]:
    """The rules the pre-filter lets run on one line, in rule order."""
    low = line.lower()
    if _ANY_HINT.search(low) is None:
        return [r for r in _PREFIXLESS if r.pre and r.pre.search(line)]
    woken = {i for h, rules in _BY_HINT.items() if h in low for i in rules}
    woken.update(i for i, pre in _PRE if pre.search(line))
    return [_LINE_RULES[i] for i in sorted(woken)]


_TABLE_RULE = re.compile(r"[ \t]*\|?(?:[ \t]*:?-{3,}:?[ \t]*\|?)+[ \t]*")
_CELL = re.compile(r"(?<=\|)[^|]*(?=\|)")
# A column named for a credential: `password`, `wifi password`, `API key`, `token`, `PIN`.
_SECRET_COLUMN = re.compile(
    rf"(?i)(?:[\w-]+[ _-])?(?:{_KW}|pass(?:word|phrase|code)?|pin|api[ _-]key|secret[ _-]key)s?"
)


def _is_table_row(line: str) -> bool:
    stripped = line.strip()
    return len(stripped) > 1 and stripped[0] == "|" and stripped[-1] == "|"


def _table_secrets(text: str) -> Iterator[Span]:
    """Cells under a column named for a credential (`| service | password |`, then
    `| wifi | ... |`): the key is the header, rows away from the value."""
    offset = 0
    columns: set[int] | None = None  # None: not in a table; else the header's secret columns
    for line in text.split("\n"):
        if not _is_table_row(line):
            columns = None
        elif columns is None:
            heads = [c.strip().strip("*_`") for c in _CELL.findall(line)]
            columns = {
                i
                for i, h in enumerate(heads)
                if _SECRET_COLUMN.fullmatch(h) and not _META_KEY.search(h)
            }
        elif columns and not _TABLE_RULE.fullmatch(line):
            for i, cell in enumerate(_CELL.finditer(line)):
                value = cell[0].strip().strip("`")
                if i not in columns or not value or any(c.isspace() for c in value):
                    continue
                if not _is_placeholder(value) and _is_secret_value(
                    value, quoted=False, config_style=False
                ):
                    start = offset + cell.start() + cell[0].index(value)
                    yield start, start + len(value)
        offset += len(line) + 1


def table_start(text: bytes, pos: int) -> int:
    """Where a scan must begin to judge the line at `pos`: a table row is judged by its
    table's header, so a row's scan starts at the table's first line."""
    lo = text.rfind(b"\n", 0, pos) + 1
    while lo > 0:
        prev = text.rfind(b"\n", 0, lo - 1) + 1
        if not _is_table_row(text[prev : lo - 1].decode("utf-8", "replace")):
            break
        lo = prev
    return lo


def _scan(text: str) -> list[tuple[int, int, str]]:
    """Return non-overlapping (start, end, kind) spans of secret values, in text order."""
    pem = _RULES[0]
    spans = [(s, e, pem.kind) for s, e in pem.find(text)] if "-----BEGIN" in text else []
    offset = 0
    tables = False
    for line in text.split("\n"):
        for rule in _wanted(line):
            for start, end in rule.find(line):
                start, end = start + offset, end + offset
                if all(end <= s or start >= e for s, e, _ in spans):
                    spans.append((start, end, rule.kind))
        tables = tables or ("|" in line and _is_table_row(line))
        offset += len(line) + 1
    if tables:
        for start, end in _table_secrets(text):
            if all(end <= s or start >= e for s, e, _ in spans):
                spans.append((start, end, TABLE_KIND))
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
