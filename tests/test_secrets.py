"""Tests for crustacean.secrets.

Every fake credential is built by concatenation so this file never holds a literal one
(`test_this_file_holds_no_literal_secret` checks that).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crustacean.config import load_config
from crustacean.errors import SecretError
from crustacean.ops.init import init_workspace
from crustacean.secrets import SecretFinding, find_secrets, redact
from crustacean.store.write import Store
from crustacean.workspace import Workspace

HEX64 = "3a7bd3e2360a3d29eea436fcfb7e44c735d117c42d1c1835420b6b9942dd4f1b"
HEX40 = HEX64[:40]
UUID = "123e4567-e89b-12d3-a456-426614174000"
JWT = (
    "eyJ" + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    "." + "eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    "." + "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM_BODY = "\n" + "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ" + "\n"


def pem(label: str, block: str = "KEY") -> str:
    """A fake PEM private-key block with the given algorithm label."""
    label = label + " " if label else ""
    head = "-----" + "BEGIN " + label + "PRIVATE " + block + "-----"
    return head + PEM_BODY + "-----END " + label + "PRIVATE " + block + "-----"


# (kind, text before, secret value, text after): the value is what `redact` must replace.
POSITIVE = [
    ("Anthropic API key", "key: ", "sk-ant-" + "api03-" + "A" * 40, " (prod)"),
    ("Anthropic API key", "export X=", "sk-ant-" + "admin01-" + "Zq9_x-Lp3" * 4, ""),
    ("OpenAI API key", "use ", "sk-" + "T3BlbkFJ" + "a1B2c3D4" * 5, " here"),
    ("OpenAI API key", "", "sk-" + "proj-" + "Ab1_Cd2-" * 10, ""),
    ("AWS access key id", "id ", "AKIA" + "IOSFODNN7ABCDEFG", " ok"),
    ("AWS access key id", "", "ASIA" + "Z" * 8 + "12345678", ""),
    (
        "AWS secret access key",
        "aws_secret_access_key = ",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "1234567890",
        "",
    ),
    ("AWS secret access key", 'AWS_SECRET_ACCESS_KEY="', "wJalrXUtnFEMI+K7MDENG" + "a" * 19, '"'),
    *[
        ("GitHub token", "t=", p + "_" + "aB3" * 12, ";")
        for p in ("ghp", "gho", "ghu", "ghs", "ghr")
    ],
    ("GitHub token", "", "github_pat_" + "11ABCDEFG0" + "a1" * 6 + "_" + "b2" * 29 + "c", ""),
    (
        "Slack token",
        "bot ",
        "xoxb-" + "123456789012-1234567890123-" + "AbCdEfGhIjKlMnOpQrStUvWx",
        "",
    ),
    ("Slack token", "", "xoxp-" + "1234567890-" + "0987654321-abcdef", " user"),
    (
        "Slack webhook URL",
        "post to ",
        "https://hooks.slack.com/" + "services/T0123ABCD/B0456EFGH/" + "aBcDeFgHiJkLmN",
        "",
    ),
    ("Stripe key", "", "sk_" + "live_" + "4eC39HqLyjWDarjtT1zdp7dc", ""),
    ("Stripe key", "", "rk_" + "live_" + "0123456789abcdefGHIJ", ""),
    ("Stripe key", "test: ", "sk_" + "test_" + "4eC39HqLyjWDarjt", ""),
    ("Google API key", "maps ", "AIza" + "Sy" + "A1b2C3d4E5" * 3 + "f6G", "."),
    ("bearer token", "Authorization: Bearer ", "abc123DEF456ghi789JKL0", ""),
    ("bearer token", "curl -H 'bearer ", "0a1b2c3d4e5f6a7b" + "8c9d0e1f2a3b4c5d", "' https://api"),
    ("JWT", "cookie session=", JWT, "; Path=/"),
    ("JWT", "Authorization: Bearer ", JWT, ""),
    *[
        ("private key block", "before\n", pem(label), "\nafter")
        for label in ("OPENSSH", "RSA", "EC", "DSA", "")
    ],
    ("private key block", "", pem("ENCRYPTED"), ""),
    ("private key block", "", pem("PGP", "KEY BLOCK"), ""),
    ("private key block", "", "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA", ""),
    ("URL credentials", "postgres://app:", "s3cret" + "Pass", "@db.internal:5432/app"),
    ("credential assignment", "password = ", "hunter2" + "secret", ""),
    ("credential assignment", 'PASSWORD: "', "Tr0ub4" + "dor", '"'),
    ("credential assignment", 'api_key="', "a1b2c3" + "d4e5f6", '"'),
    ("credential assignment", "client_secret=", "Zx9kLm" + "2Pq7Rt", ""),
    ("credential assignment", "DB_PASSWORD=", "s3cr3t" + "-pass", "\n"),
    ("credential assignment", "DB_PASSWORD=", "correcthorse" + "battery", ""),
    ("credential assignment", "passwd: ", "Tr0ub4" + "dor&3", ""),
    ("credential assignment", "pwd=", "qwerty" + "12345", ""),
    ("credential assignment", "the password: ", "Summer" + "2024!", " for now"),
    ("credential assignment", "auth_token: ", "abc123" + "xyz789", " # ci"),
    ("credential assignment", '{"apiKey": "', "q1w2e3" + "r4t5y6", '"}'),
    ("credential assignment", "secretKey := `", "k9-Lm" + "2xQ", "`"),
    ("credential assignment", "aws_access_key: ", "Kf8s2L" + "q0Zp", ""),
    ("credential assignment", "--password=", "p@ssw0" + "rd!", " --user bob"),
    ("credential assignment", "**Password:** `", "Tr0ub4" + "dor&3", "`"),
    # the formats of issue 20: each was stored, or sent to the model, before
    (
        "Telegram bot token",
        "bot token ",
        "123456789:" + "AAH7xK2mQ9" + "zT4vW8bN1cR5eY3uI6oP0aSdF",
        "",
    ),
    (
        "Telegram bot token",
        "TELEGRAM_BOT_TOKEN=",
        "7012345678:" + "AAE" + "k3Jd9sLq2Wm8Xn5Bv7Cz1Rt4Yp6qW9eR",
        "",
    ),
    ("Hugging Face token", "HF: ", "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ" + "01234567", "."),
    ("GitLab token", "push with ", "glpat-" + "xY1zA2bC3dE4fG5hI6jK", ""),
    ("npm token", "publish: ", "npm_" + "a1B2c3D4e5F6g7H8i9J0" + "kLmNoPqRsTuVwXyZ", ""),
    ("npm token", "//registry.internal/:_authToken=", "npm_" + "Zz9" * 12, ""),
    ("Google OAuth token", "access ", "ya29." + "a0AfH6SMBq7Lk2" + "_Zx9vYb3Nc4Md5", " expires"),
    (
        "Discord bot token",
        "discord ",
        "M" + "TA1MjM0NTY3ODkwMTIzNDU2Nz" + "." + "Gh1jKl" + "." + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ0",
        "",
    ),
    (
        "Azure storage key",
        "DefaultEndpointsProtocol=https;AccountName=acct;",
        "AccountKey=" + "Ab1+Cd2/Ef3G" * 7 + "h4==",
        ";EndpointSuffix=core.windows.net",
    ),
    ("Brave API key", "BRAVE_API_KEY=", "BSA" + "aS7k9cWiKkUZl" + "HbQYYvWWnSRZBtW", ""),
    ("Composio API key", "COMPOSIO_API_KEY=", "ak_" + "Zq8vT2_mW5nPb7LrX3cY", ""),
    ("Composio API key", "the composio key is ", "ak_" + "t-F9AbvfZHU7SUrqAGNn", ", keep it"),
    ("URL credentials", "REDIS_URL=redis://:", "s3cret" + "Pw9", "@cache:6379/0"),
    ("URL credentials", "clone https://bob:", "hunter" + "2pw", "@git.internal/repo.git"),
    ("URL credentials", "amqp://guest:", "Gu3st" + "Pass", "@rabbit:5672"),
    ("hex token", "here is the API token ", HEX64[:8] + "ffee" + HEX64[12:40], " for the bot"),
    ("hex token", "Auth: ", HEX64[:32].upper(), ""),
    ("Twilio key", "twilio ", "SK" + "0123456789abcdef" * 2, ""),
    (
        "SendGrid API key",
        "",
        "SG." + "aB3dE5gH7jK9mN1pQ3sT5v" + "." + "w" * 20 + "Xy1" * 7 + "z2",
        "",
    ),
    ("PyPI token", "", "pypi-" + "AgEIcHlwaS5vcmc" + "CJ" + "a1b2c3d4e5" * 7, ""),
    ("Mailchimp API key", "mc ", "0123456789abcdef" * 2 + "-us6", ""),
    ("Square OAuth secret", "", "sq0csp-" + "aB3dE5gH7jK9mN1pQ3sT5vW7yZ0" + "cD2eF4gH6iJ8kL0m", ""),
]
POSITIVE_IDS = [f"{kind}-{i}" for i, (kind, *_) in enumerate(POSITIVE)]

NEGATIVE = [
    "",
    # prose that only mentions the words
    "The password policy requires 12 characters.",
    "Reset your password: go to settings.",
    "reset your password: navigate to Settings > Security.",
    "token budget: 4000 tokens",
    "Token budget: 4000 tokens per call; max_tokens: 4096000.",
    "We rotate the API key every 90 days; the secret: consistency.",
    "Password: see the team vault",
    "Token: authentication happens upstream",
    "The bearer token is sent in the Authorization header.",
    "passwords: must never be stored in notes",
    "tokenizer: cl100k_base",
    "token_type: bearer",
    # placeholders
    "api_key: <your-key>",
    "Authorization: Bearer <token>",
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer ${GITHUB_TOKEN}",
    "password: ***",
    "password: ****************",
    "token=${GITHUB_TOKEN}",
    "api_key=$ANTHROPIC_API_KEY",
    "token: ${{ secrets.GITHUB_TOKEN }} and url = f'https://x?api_key={api_key}'",
    "password=%(db_password)s",
    "api_key=xxxxxxxxxxxxxxxx",
    "password: changeme",
    "api_key = ...",
    "token: REDACTED",
    "secret: <redacted>",
    "api_key: YOUR_API_KEY_HERE",
    "webhook: https://hooks.slack.com/services/...",
    "AKIA" + "X" * 16,
    "ghp_" + "x" * 36,
    # digests, commit ids, UUIDs
    "expected_sha256: " + HEX64,
    "sha256:" + HEX64,
    "secret_sha256: " + HEX64,
    "password_hash: " + HEX64,
    "commit " + HEX40 + " fixed it; short id 3a7bd3e",
    "request_id: " + UUID,
    "session " + UUID + " ended",
    # URLs without credentials
    "https://docs.anthropic.com/en/api/getting-started",
    "https://user@example.com/repo.git and http://localhost:8080/api?page=2",
    "git@github.com:owner/repo.git",
    # code that references a secret instead of holding it
    "client = Anthropic(api_key=api_key)",
    'api_key = os.environ["ANTHROPIC_API_KEY"]',
    "token = settings.GITHUB_TOKEN",
    "password_file: /run/secrets/db_password",
    "api_key: Optional[str] = None",
    "secret_key = secrets.token_hex(32)",
    # what the store and the pipeline themselves write, and ordinary prose around the new formats
    '{"path": "MEMORY.md", "expected_sha256": "' + HEX64 + '"}',
    "The token's sha256 is " + HEX64 + ".",
    "the auth change landed in commit " + HEX40 + " yesterday",
    "key fingerprint " + HEX64[:32],
    "api key id " + HEX64[:32],
    "chat 123456789:some-very-long-hyphenated-topic-name-here",
    "call hf_hub_download(repo_id) and set npm_config_cache",
    "ak_sample_name and ak_config_loader are helper names",
    "BSA requirements are in the doc",
    "redis://localhost:6379/0 and postgres://db.internal:5432/app",
    "SKILL_ACCUMULATION_IS_A_GOAL_OF_THIS_PLAN",
    "- [2026-01-05] Discussed the token budget (4000) and the API key rotation.",
    "| kind | path |\n| --- | --- |\n| hot | memory/notes/token-budget.md |",
    "[REDACTED:Telegram bot token] was removed from the log",
]


def joined(case: tuple[str, str, str, str]) -> str:
    """The full text of a positive case."""
    _, before, value, after = case
    return before + value + after


@pytest.mark.parametrize("case", POSITIVE, ids=POSITIVE_IDS)
def test_each_kind_is_found_redacted_and_never_shown(case: tuple[str, str, str, str]) -> None:
    kind, before, value, after = case
    found = find_secrets(joined(case))
    assert found == [SecretFinding(kind, before.count("\n") + 1)]
    for finding in found:
        assert value not in repr(finding) and value not in str(finding)
        assert all(value not in str(field) for field in vars(finding).values())
    redacted = redact(joined(case))
    assert redacted == f"{before}[REDACTED:{kind}]{after}"  # the value, and only it
    assert value not in redacted and find_secrets(redacted) == []


@pytest.mark.parametrize("text", NEGATIVE)
def test_ignores_non_secrets(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == text


def test_line_numbers_in_multiline_text() -> None:
    text = "\n".join(
        [
            "# Deploy notes",
            "The password policy requires 12 characters.",
            "api_key=" + "a1b2c3" + "d4e5f6",
            "",
            "then export " + "AKIA" + "IOSFODNN7ABCDEFG" + " and done",
            "expected_sha256: " + HEX64,
            pem("RSA"),
            "Authorization: Bearer " + "abc123DEF456ghi789JKL0",
        ]
    )
    assert find_secrets(text) == [
        SecretFinding("credential assignment", 3),
        SecretFinding("AWS access key id", 5),
        SecretFinding("private key block", 7),
        SecretFinding("bearer token", 10),
    ]


def test_redact_keeps_surrounding_text_and_several_secrets() -> None:
    key = "sk-ant-" + "api03-" + "B" * 40
    token = "ghp_" + "aB3" * 12
    text = f"Notes:\nuse {key} for prod\ntoken={token}\nexpected_sha256: {HEX64}\n"
    assert redact(text) == (
        "Notes:\nuse [REDACTED:Anthropic API key] for prod\n"
        f"token=[REDACTED:GitHub token]\nexpected_sha256: {HEX64}\n"
    )


def test_overlapping_rules_report_once_with_the_specific_kind() -> None:
    text = 'api_key="' + "sk-ant-" + "api03-" + "C" * 40 + '"'
    assert find_secrets(text) == [SecretFinding("Anthropic API key", 1)]


def test_finding_is_frozen() -> None:
    finding = SecretFinding("JWT", 1)
    with pytest.raises(AttributeError):
        finding.line = 2  # type: ignore[misc]  # the write under test


@pytest.mark.parametrize(
    "text",
    [
        "password_token_secret_" * 20_000,
        "a." * 200_000,
        "-----BEGIN RSA " + "PRIVATE KEY-----\n" * 2_000,
        "sk-" + "a-" * 200_000,
        "Bearer " * 50_000,
    ],
    ids=["keyword-run", "dotted-run", "pem-headers", "dash-run", "bearer-run"],
)
def test_pathological_input_completes(text: str) -> None:
    # Runs on every write: a pattern that backtracked quadratically would hang here for minutes
    # (speed itself is measured in bench/, not asserted).
    assert find_secrets(text) is not None


def test_truncated_key_block_redacts_only_the_key_lines() -> None:
    text = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nNext paragraph here."
    assert redact(text) == "[REDACTED:private key block]\nNext paragraph here."


def test_this_file_holds_no_literal_secret() -> None:
    assert find_secrets(Path(__file__).read_text(encoding="utf-8")) == []


def test_file_names_with_key_words_are_not_assignments() -> None:
    # compile's digest lists paths like this one; refusing it would stop the weekly digest
    assert find_secrets("- memory/notes/token-budget-3.md: hot→warm: 12 days without recall") == []
    assert find_secrets("- knowledge/topics/password-policy.md: warm→cold: 40 days") == []


# ---------------------------------------------------------------- refusal at write time


@pytest.fixture(scope="module")
def refusing_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """One workspace for the whole table: every write below is refused, so none changes it."""
    root = tmp_path_factory.mktemp("refusals") / "ws"
    init_workspace(root, detect=False)
    return Store(Workspace(root, load_config(root)))


@pytest.mark.parametrize("case", POSITIVE, ids=POSITIVE_IDS)
def test_a_write_holding_any_kind_is_refused_naming_kind_and_line(
    case: tuple[str, str, str, str], refusing_store: Store
) -> None:
    kind, before, value, _ = case
    content = "# Notes\n\n- a fact\n- " + joined(case) + "\n"
    head = refusing_store.git.head()
    with pytest.raises(SecretError) as err:
        refusing_store.write_context(
            [{"path": "memory/notes/creds.md", "mode": "create", "content": content}],
            actor="mcp",
            message="remember the setup",
        )
    message = str(err.value)
    assert f"line {4 + before.count(chr(10))} " in message and f"({kind})" in message
    assert value not in message
    assert not (refusing_store.root / "memory/notes/creds.md").exists()
    assert refusing_store.git.head() == head
