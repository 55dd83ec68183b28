"""Credentials as people paste them, and ordinary texts that look a little like them.

Every value is generated from a seeded `random.Random` in the providers' published formats
(prefix, alphabet, length), so nothing here is a real key and no literal one is in the file.
`tests/test_secrets_corpus.py` holds the detector to every case, in every place a write or a
transcript can carry it; `bench/secrets_bench.py` reports detected / missed / false positives
per kind over many more samples.
"""

from __future__ import annotations

import base64
import json
import random
import string
import uuid
from collections.abc import Callable
from dataclasses import dataclass

LOWER = string.ascii_lowercase
UPPER = string.ascii_uppercase
LETTERS = string.ascii_letters
DIGITS = string.digits
HEX = "0123456789abcdef"
ALNUM = LETTERS + DIGITS
URLSAFE = ALNUM + "_-"
B64 = ALNUM + "+/"
BASE32 = UPPER + "234567"
PUNCT = "!#%&*+-.:;=?@^_~"


@dataclass(frozen=True)
class Case:
    """One pasted credential: its kind, the text holding it, and the value itself (what must
    never be written, sent or echoed). `alone`: the value is recognisable without the words
    around it, so it is caught even as a file name."""

    kind: str
    text: str
    value: str
    alone: bool = True


def pick(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def password(rng: random.Random) -> str:
    """A password as a person or a generator makes one: letters, digits and a symbol or two."""
    body = pick(rng, ALNUM, rng.randint(10, 18))
    return body + rng.choice(DIGITS) + rng.choice(PUNCT[:8])


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    head = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {
        "sub": str(rng.randint(10**9, 10**10)),
        "iat": rng.randint(1_600_000_000, 1_800_000_000),
    }
    body = _b64url(json.dumps(claims).encode())
    return f"{head}.{body}.{_b64url(rng.randbytes(32))}"


def _pem(rng: random.Random, label: str) -> str:
    body = base64.b64encode(rng.randbytes(48 * 6)).decode()
    lines = "\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    head = "-----" + "BEGIN " + label + "PRIVATE KEY-----"
    return f"{head}\n{lines}\n-----END {label}PRIVATE KEY-----"


def _discord(rng: random.Random) -> str:
    user = _b64url(str(rng.randint(10**17, 10**18)).encode())
    return f"{user}.{pick(rng, URLSAFE, 6)}.{pick(rng, URLSAFE, 38)}"


def _aws_id(rng: random.Random, letters_only: bool) -> str:
    return "AKIA" + pick(rng, UPPER if letters_only else BASE32, 16)


def _hf(rng: random.Random, letters_only: bool) -> str:
    return "hf_" + pick(rng, LETTERS if letters_only else ALNUM, 34)


Maker = Callable[[random.Random], Case]


def _tok(kind: str, make: Callable[[random.Random], str], form: str = "{v}") -> Maker:
    """A case whose text is `form` around one generated value."""

    def case(rng: random.Random) -> Case:
        value = make(rng)
        return Case(kind, form.format(v=value), value)

    return case


def _ctx(kind: str, make: Callable[[random.Random], str], form: str) -> Maker:
    """A case recognisable only by the words around the value (a key, a column, a flag)."""

    def case(rng: random.Random) -> Case:
        value = make(rng)
        return Case(kind, form.format(v=value), value, alone=False)

    return case


def _sas(rng: random.Random) -> Case:
    sig = base64.b64encode(rng.randbytes(32)).decode().replace("=", "%3D")
    acct = pick(rng, LOWER, 10)
    url = (
        f"https://{acct}.blob.core.windows.net/backups/db.tar?sv=2022-11-02&ss=b&srt=o"
        f"&sp=r&se=2026-12-31T00:00:00Z&st=2026-01-01T00:00:00Z&spr=https&sig={sig}"
    )
    return Case("Azure SAS token", url, sig, alone=False)


def _table(rng: random.Random) -> Case:
    value = password(rng)
    text = (
        "| service | user | password |\n|---|---|---|\n"
        f"| printer | admin | {pick(rng, LOWER, 4)} |\n| wifi | guest | {value} |"
    )
    return Case("password in a table", text, value, alone=False)


def _pem_case(label: str) -> Maker:
    def case(rng: random.Random) -> Case:
        block = _pem(rng, label)
        return Case("private key block", f"deploy key:\n{block}\n", block, alone=False)

    return case


# Every kind the detector claims, each in the forms people paste it.
MAKERS: tuple[Maker, ...] = (
    _pem_case("RSA "),
    _pem_case("OPENSSH "),
    _pem_case(""),
    _tok("Anthropic API key", lambda r: "sk-ant-api03-" + pick(r, URLSAFE, 93) + "AA"),
    _tok(
        "Anthropic API key",
        lambda r: "sk-ant-api03-" + pick(r, URLSAFE, 93) + "AA",
        "ANTHROPIC_API_KEY={v}",
    ),
    _tok("OpenRouter API key", lambda r: "sk-or-v1-" + pick(r, HEX, 64)),
    _tok("OpenAI API key", lambda r: "sk-proj-" + pick(r, URLSAFE, 156)),
    _tok("OpenAI API key", lambda r: "sk-" + pick(r, ALNUM, 20) + "T3BlbkFJ" + pick(r, ALNUM, 20)),
    _tok("ElevenLabs API key", lambda r: "sk_" + pick(r, HEX, 48)),
    _tok("AWS access key id", lambda r: _aws_id(r, False)),
    _tok("AWS access key id", lambda r: _aws_id(r, True)),
    _ctx(
        "AWS access key id",
        lambda r: _aws_id(r, True),
        "[default]\naws_access_key_id = {v}\nregion = eu-west-1",
    ),
    _ctx("AWS secret access key", lambda r: pick(r, B64, 40), "aws_secret_access_key = {v}"),
    _ctx(
        "Azure storage key",
        lambda r: base64.b64encode(r.randbytes(64)).decode(),
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={v};"
        "EndpointSuffix=core.windows.net",
    ),
    _sas,
    _tok(
        "Azure AD client secret",
        lambda r: pick(r, ALNUM + "_~.", 3) + r.choice(DIGITS) + "Q~" + pick(r, ALNUM + "_~.-", 34),
        "client_secret={v}",
    ),
    _tok("GitHub token", lambda r: "ghp_" + pick(r, ALNUM, 36)),
    _tok(
        "GitHub token",
        lambda r: "github_pat_11" + pick(r, UPPER + DIGITS, 20) + "_" + pick(r, ALNUM, 59),
    ),
    _tok("GitLab token", lambda r: "glpat-" + pick(r, URLSAFE, 20)),
    _tok("Hugging Face token", lambda r: _hf(r, False)),
    _tok("Hugging Face token", lambda r: _hf(r, True)),
    _tok("Hugging Face token", lambda r: _hf(r, True), "HF_TOKEN={v}"),
    _tok("npm token", lambda r: "npm_" + pick(r, ALNUM, 36)),
    _tok("PyPI token", lambda r: "pypi-AgEIcHlwaS5vcmc" + pick(r, URLSAFE, 70)),
    _tok("Google OAuth token", lambda r: "ya29.a0" + pick(r, URLSAFE, 100)),
    _tok("Google API key", lambda r: "AIza" + pick(r, URLSAFE, 35)),
    _tok("Google OAuth client secret", lambda r: "GOCSPX-" + pick(r, URLSAFE, 28)),
    _tok(
        "Slack webhook URL",
        lambda r: (
            "https://hooks.slack.com/services/T"
            + pick(r, UPPER + DIGITS, 8)
            + "/B"
            + pick(r, UPPER + DIGITS, 10)
            + "/"
            + pick(r, ALNUM, 24)
        ),
    ),
    _tok(
        "Slack token",
        lambda r: f"xoxb-{pick(r, DIGITS, 12)}-{pick(r, DIGITS, 13)}-" + pick(r, ALNUM, 24),
    ),
    _tok(
        "Slack token",
        lambda r: (
            f"xoxp-{pick(r, DIGITS, 12)}-{pick(r, DIGITS, 12)}-"
            f"{pick(r, DIGITS, 13)}-{pick(r, HEX, 32)}"
        ),
    ),
    _tok(
        "Slack token",
        lambda r: (
            f"xapp-1-A{pick(r, UPPER + DIGITS, 10)}-{pick(r, DIGITS, 13)}-" + pick(r, HEX, 64)
        ),
    ),
    _tok("Stripe key", lambda r: "sk_live_" + pick(r, ALNUM, 99)),
    _tok("Stripe key", lambda r: "rk_live_" + pick(r, ALNUM, 24)),
    _tok("Stripe key", lambda r: "whsec_" + pick(r, ALNUM, 32)),
    _tok("SendGrid API key", lambda r: "SG." + pick(r, URLSAFE, 22) + "." + pick(r, URLSAFE, 43)),
    _tok("Square access token", lambda r: "sq0atp-" + pick(r, URLSAFE, 22)),
    _tok("Square access token", lambda r: "EAAA" + pick(r, URLSAFE, 60)),
    _tok("Square OAuth secret", lambda r: "sq0csp-" + pick(r, URLSAFE, 43)),
    _tok("Facebook access token", lambda r: "EAAB" + pick(r, ALNUM, 160)),
    _tok("Mailchimp API key", lambda r: pick(r, HEX, 32) + "-us" + str(r.randint(1, 21))),
    _tok(
        "Telegram bot token",
        lambda r: f"{r.randint(10**9, 10**10 - 1)}:AA" + pick(r, ALNUM, 31) + pick(r, URLSAFE, 2),
    ),
    _tok("Discord bot token", _discord),
    _tok(
        "Discord webhook URL",
        lambda r: f"https://discord.com/api/webhooks/{pick(r, DIGITS, 18)}/" + pick(r, URLSAFE, 68),
    ),
    _tok("Twilio key", lambda r: "SK" + pick(r, HEX, 32)),
    _tok("Brave API key", lambda r: "BSA" + pick(r, ALNUM, 28)),
    _tok("Composio API key", lambda r: "ak_" + pick(r, URLSAFE, 20)),
    _tok("DigitalOcean token", lambda r: "dop_v1_" + pick(r, HEX, 64)),
    _tok("Shopify token", lambda r: "shpat_" + pick(r, HEX, 32)),
    _tok("Groq API key", lambda r: "gsk_" + pick(r, ALNUM, 52)),
    _tok("Replicate API token", lambda r: "r8_" + pick(r, ALNUM, 37)),
    _tok("Perplexity API key", lambda r: "pplx-" + pick(r, ALNUM, 48)),
    _tok("xAI API key", lambda r: "xai-" + pick(r, ALNUM, 80)),
    _tok("Notion token", lambda r: "ntn_" + pick(r, DIGITS, 11) + pick(r, ALNUM, 35)),
    _tok("Linear API key", lambda r: "lin_api_" + pick(r, ALNUM, 40)),
    _tok("Postman API key", lambda r: "PMAK-" + pick(r, HEX, 24) + "-" + pick(r, HEX, 34)),
    _tok("Docker Hub token", lambda r: "dckr_pat_" + pick(r, URLSAFE, 27)),
    _tok("Supabase token", lambda r: "sbp_" + pick(r, HEX, 40)),
    _tok("Grafana token", lambda r: "glsa_" + pick(r, ALNUM, 32) + "_" + pick(r, HEX, 8)),
    _tok("Sentry token", lambda r: "sntryu_" + pick(r, HEX, 64)),
    _tok("age secret key", lambda r: "AGE-SECRET-KEY-1" + pick(r, UPPER + DIGITS, 58)),
    _tok("LangSmith API key", lambda r: "lsv2_pt_" + pick(r, HEX, 32) + "_" + pick(r, HEX, 10)),
    _tok(
        "Tailscale key",
        lambda r: "tskey-auth-k" + pick(r, ALNUM, 10) + "CNTRL-" + pick(r, ALNUM, 30),
    ),
    _tok("Figma token", lambda r: "figd_" + pick(r, URLSAFE, 40)),
    _tok("Airtable token", lambda r: "pat" + pick(r, ALNUM, 14) + "." + pick(r, HEX, 64)),
    _tok(
        "Atlassian API token",
        lambda r: "ATATT3xFfGF0" + pick(r, URLSAFE, 170) + "=" + pick(r, HEX.upper(), 8),
    ),
    _tok("Databricks token", lambda r: "dapi" + pick(r, HEX, 32)),
    _tok("Doppler token", lambda r: "dp.pt." + pick(r, ALNUM, 43)),
    _tok("Fly.io token", lambda r: "fo1_" + pick(r, URLSAFE, 43)),
    _tok("1Password service account token", lambda r: "ops_eyJ" + pick(r, ALNUM, 300)),
    _tok("Resend API key", lambda r: "re_" + pick(r, ALNUM, 8) + "_" + pick(r, ALNUM, 24)),
    _tok("Tavily API key", lambda r: "tvly-dev-" + pick(r, ALNUM, 32)),
    _tok("Firecrawl API key", lambda r: "fc-" + pick(r, HEX, 32)),
    _tok("Mailgun API key", lambda r: "key-" + pick(r, HEX, 32)),
    _tok(
        "Mapbox token", lambda r: "sk.eyJ1Ijoi" + pick(r, URLSAFE, 60) + "." + pick(r, URLSAFE, 22)
    ),
    _tok("Heroku API key", lambda r: "HRKU-AA" + pick(r, URLSAFE, 58)),
    _tok("Vault token", lambda r: "hvs." + pick(r, URLSAFE, 95)),
    _tok("Dropbox token", lambda r: "sl." + pick(r, URLSAFE, 138)),
    _tok(
        "Braintree token",
        lambda r: "access_token$production$" + pick(r, LOWER + DIGITS, 16) + "$" + pick(r, HEX, 32),
    ),
    _tok("JWT", _jwt, "session={v}; Path=/"),
    _ctx("URL credentials", password, "DATABASE_URL=postgres://app:{v}@db.internal:5432/app"),
    _ctx("URL credentials", password, "redis://:{v}@cache.internal:6379/0"),
    _ctx("curl password", password, "curl -u bob:{v} https://api.internal/v1/me"),
    _ctx("curl password", password, "curl -s --user 'deploy:{v}' https://ci.internal/job"),
    _ctx("bearer token", lambda r: pick(r, ALNUM, 40), "Authorization: Bearer {v}"),
    _ctx("credential assignment", password, "password: {v}"),
    _ctx("credential assignment", password, "DB_PASSWORD={v}"),
    _ctx("credential assignment", lambda r: "example" + pick(r, ALNUM, 10) + "9!", "password: {v}"),
    _ctx("credential assignment", lambda r: pick(r, ALNUM, 24), 'api_key = "{v}"'),
    _ctx("hex token", lambda r: pick(r, HEX, 40), "the deploy token is {v} for the bot"),
    _table,
)


def credentials(rng: random.Random) -> list[Case]:
    """One case of every form, with fresh values."""
    return [make(rng) for make in MAKERS]


# ---------------------------------------------------------------- ordinary texts


def _sha(rng: random.Random) -> str:
    return f"expected_sha256: {rng.randbytes(32).hex()}"


def _git(rng: random.Random) -> str:
    full = rng.randbytes(20).hex()
    return f"commit {full}\n{full[:7]} fix the token budget check\nmerged {full[:12]}"


def _uuid(rng: random.Random) -> str:
    return f"request_id: {uuid.UUID(bytes=rng.randbytes(16), version=4)} session ended"


def _image(rng: random.Random) -> str:
    data = base64.b64encode(b"\x89PNG\r\n\x1a\n" + rng.randbytes(3000)).decode()
    return f"![chart](data:image/png;base64,{data})"


def _code(rng: random.Random) -> str:
    name = rng.choice(["ANTHROPIC_API_KEY", "GITHUB_TOKEN", "DB_PASSWORD"])
    return rng.choice(
        [
            f'api_key = os.environ["{name}"]\nclient = Anthropic(api_key=api_key)',
            f"token = settings.{name}\nheaders = {{'Authorization': f'Bearer {{token}}'}}",
            f'curl -u "$USER:${name}" https://api.internal/v1/me',
            "secret_key = secrets.token_hex(32)\npassword_hash = bcrypt.hashpw(pw, salt)",
            f"def rotate(api_key: str) -> None:\n    log.info('rotating %s', {name.lower()!r})",
        ]
    )


_PROSE = (
    "Reset your password in settings; the password policy asks for 12 characters.",
    "The wifi password is on the fridge, ask Anna for it.",
    "We rotate the API key every 90 days and keep the token budget at 4000.",
    "Password: see the team vault",
    "the bearer token goes in the Authorization header, never in the URL",
    "| service | password |\n|---|---|\n| wifi | see the vault |\n| printer | *** |",
    "| kind | path |\n| --- | --- |\n| hot | memory/notes/token-budget.md |",
)


def _prose(rng: random.Random) -> str:
    return rng.choice(_PROSE)


def _words(rng: random.Random) -> str:
    """Identifiers and hyphenated names, the shapes that share prefixes with tokens."""
    words = ["hub", "download", "model", "config", "loader", "sample", "session", "skill"]
    a, b, c = (rng.choice(words) for _ in range(3))
    return rng.choice(
        [
            f"call hf_{a}_{b}() then set npm_config_{c}",
            f"ak_{a}_{b} and sk-learn-{c} are helper names",
            f"see the {a}-{b}-{c} doc at https://docs.internal/{a}/{b}?page=2",
            f"{a.upper()}_{b.upper()}_{c.upper()}_IS_A_GOAL",
        ]
    )


ORDINARY: dict[str, Callable[[random.Random], str]] = {
    "sha256 digest": _sha,
    "git commit ids": _git,
    "UUID": _uuid,
    "base64 image": _image,
    "code that reads a secret": _code,
    "prose with the word password": _prose,
    "names with token-like prefixes": _words,
}


def ordinary(rng: random.Random) -> list[tuple[str, str]]:
    """(kind, text) of every ordinary form, fresh."""
    return [(kind, make(rng)) for kind, make in ORDINARY.items()]
