"""A realistic generated workspace for the benchmarks: memory files, knowledge and daily logs.

`generate_workspace(root)` initializes a workspace, then writes files directly (bench data, not
product writes): `memory_files` notes spread over memory/{contacts,groups,lessons,notes,
reminders,ideas,goals,lists} and knowledge/topics, each 300–3,000 characters of markdown with
headings, paragraphs and lists, some with frontmatter (name, recorded, tier), plus one daily log
per day for `days` days. Words are drawn from a Zipf distribution over ~600 common English words
followed by a long tail of 15,000 made-up words, so a few words are everywhere and most are rare,
as in real notes. The same seed gives the same bytes.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from datetime import date, timedelta
from itertools import accumulate
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # runnable from a checkout

from crustacean.ops.init import init_workspace

FOLDERS = (
    *(f"memory/{d}" for d in ("contacts", "groups", "lessons", "notes")),
    *(f"memory/{d}" for d in ("reminders", "ideas", "goals", "lists")),
    "knowledge/topics",
)
TIERS = ("hot", "warm", "cold")
CATEGORIES = ("decision", "preference", "fact", "todo", "lesson", "event", "contact")

# Most frequent first: the Zipf rank of a word is its position here.
_WORD_TEXT = """
the to and of a in is that for it on with as was be this are have at not you by or but from
we they will an can if so all about more when one there would what their which up out has
do just also new time like than been some them people other could into now only then its
our get make work first because any well way even these use how need two over back after
much good most day see know think right still year take should where long really too here
through want many look last very while same down things thing own those both week few every
going since again part around between today set never next yesterday help point kind keep
project meeting team plan idea note call email message server deploy build release code
review test issue bug fix change update version branch merge commit config file folder
report budget price order invoice client customer account payment contract schedule deadline
morning evening night weekend monday tuesday wednesday thursday friday saturday sunday
lunch dinner coffee tea breakfast kitchen garden house car train bus flight hotel trip
travel city street park river lake mountain beach island forest village market shop store
doctor dentist school teacher student class course book paper article story chapter page
music song concert film movie show game match sport football tennis running cycling swim
family mother father sister brother daughter son friend partner neighbor colleague manager
birthday anniversary wedding holiday party gift present card letter photo picture video
phone laptop computer screen keyboard printer camera battery charger cable network router
password backup database query index cache queue worker service process thread memory disk
storage cloud bucket cluster node container image registry pipeline job cron task agent
model prompt token context window limit cost usage tier archive digest lesson rule policy
health sleep exercise diet weight walk run yoga stretch habit routine goal target progress
reading writing learning practice lesson skill language spanish french german piano guitar
recipe soup bread pasta rice salad cheese chocolate cake fruit apple orange banana lemon
weather rain snow wind storm sun cloud cold warm hot summer winter spring autumn season
bank loan tax insurance rent mortgage salary bonus expense receipt refund discount savings
office desk chair room window door floor wall roof stairs garage basement attic balcony
dog cat bird fish horse rabbit turtle parrot hamster puppy kitten vet leash collar treat
idea brainstorm draft outline sketch prototype design mockup feedback survey interview
launch demo pitch investor board strategy roadmap milestone quarter sprint backlog ticket
support incident outage alert monitor dashboard metric latency error warning timeout retry
security key token secret certificate domain email spam filter calendar reminder alarm
contact address phone number street postcode country region state county border visa
quiet loud bright dark early late quick slow careful simple complex clear vague honest
happy tired busy calm nervous excited grateful curious patient stubborn kind generous
red blue green yellow purple black white grey silver golden brown pink orange
heron otter badger falcon walrus marmot beaver kestrel plover osprey lynx bison moose
harbor quarry meadow canyon glacier orchard vineyard lighthouse pier marina cottage barn
lantern compass anchor ladder hammer chisel saddle kettle blanket pillow mirror candle
violin cello trumpet flute harp drum banjo accordion clarinet oboe tuba organ ukulele
maple cedar birch willow spruce aspen juniper hazel alder rowan poplar sycamore laurel
granite marble slate basalt quartz amber copper bronze pewter cobalt nickel zinc tin
velvet linen denim tweed flannel wool silk cotton canvas leather suede corduroy satin
comet nebula galaxy orbit eclipse meteor asteroid crater satellite telescope planet moon
ferry tram canoe kayak yacht glider scooter tractor wagon sled raft barge tugboat
"""
COMMON = list(dict.fromkeys(_WORD_TEXT.split()))
TAIL_WORDS = 15_000
STOP = 60  # the first 60 are function words: no headings or file names made of them


def _tail(n: int) -> list[str]:
    """Made-up words for the long tail real notes have (names, jargon, rare words)."""
    rng = random.Random(0)
    onsets, vowels, codas = "b br c d f g gr k l m n p pl r s st t tr v w z", "aeiou", "lmnrstx"
    known = set(COMMON)
    out: list[str] = []
    while len(out) < n:
        syllables = [
            rng.choice(onsets.split()) + rng.choice(vowels) for _ in range(rng.randint(2, 3))
        ]
        word = "".join(syllables) + (rng.choice(codas) if rng.random() < 0.5 else "")
        if word not in known:
            known.add(word)
            out.append(word)
    return out


# Rank order: common English first, then the tail; the Zipf rank of a word is its index + 1.
WORDS = COMMON + _tail(TAIL_WORDS)
_FUNCTION_WORDS = frozenset(WORDS[:STOP])

_NAME_TEXT = """
alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert sybil
trent victor walter yasmin zoe amir bea chen dara emil fatima goran hana ilse jonas kemal
lena mika nora oskar pia quinn rosa sven tara umar vera wen xavi yuki zara
"""
NAMES = _NAME_TEXT.split()


@dataclass
class Generated:
    """What was written, as workspace-relative paths."""

    root: Path
    memory_files: list[str] = field(default_factory=list)
    daily_files: list[str] = field(default_factory=list)


class _Text:
    """Zipf-distributed words and the markdown built from them."""

    def __init__(self, rng: random.Random, exponent: float = 1.05) -> None:
        self.rng = rng
        self.cum = list(accumulate(1 / (rank**exponent) for rank in range(1, len(WORDS) + 1)))

    def words(self, n: int) -> list[str]:
        return self.rng.choices(WORDS, cum_weights=self.cum, k=n)

    def sentence(self) -> str:
        words = self.words(self.rng.randint(6, 18))
        return " ".join(words).capitalize() + self.rng.choice(".....?!")

    def content_words(self, n: int) -> list[str]:
        """Zipf-drawn words without the function words, as headings and file names have."""
        out: list[str] = []
        while len(out) < n:
            out += [w for w in self.words(n * 3) if w not in _FUNCTION_WORDS and w not in out]
        return out[:n]

    def title(self, lo: int = 1, hi: int = 4) -> str:
        return " ".join(self.content_words(self.rng.randint(lo, hi))).capitalize()

    def paragraph(self) -> str:
        return " ".join(self.sentence() for _ in range(self.rng.randint(1, 5)))

    def bullets(self) -> str:
        return "\n".join(f"- {self.sentence()}" for _ in range(self.rng.randint(2, 6)))


def memory_file(text: _Text, folder: str, name: str, recorded: date) -> str:
    """One note: optional frontmatter, a title, then sections until 300–3,000 characters."""
    rng = text.rng
    target = rng.randint(300, 3000)
    parts: list[str] = []
    if rng.random() < 0.6:
        tier = f"tier: {rng.choice(TIERS)}\n" if rng.random() < 0.3 else ""
        parts.append(f"---\nname: {name}\nrecorded: {recorded.isoformat()}\n{tier}---\n")
    parts.append(f"# {name.replace('-', ' ').title()}\n")
    size = sum(map(len, parts))
    while size < target:
        block = f"## {text.title()}\n\n" if rng.random() < 0.35 or len(parts) < 3 else ""
        block += (text.bullets() if rng.random() < 0.4 else text.paragraph()) + "\n"
        block = block[: max(target - size, 80)].rstrip() + "\n"
        parts.append(block)
        size += len(block)
    return "\n".join(parts)


def daily_log(text: _Text, day: date) -> str:
    """A day's log: timestamped entries with a category, as collect appends them."""
    rng = text.rng
    lines = [f"# {day.isoformat()}", ""]
    for hour in sorted(rng.sample(range(7, 23), rng.randint(2, 10))):
        kind = rng.choice(CATEGORIES)
        lines.append(f"- {hour:02d}:{rng.randint(0, 59):02d} [{kind}] {text.sentence()}")
    return "\n".join(lines) + "\n"


def _name(text: _Text, folder: str, i: int) -> str:
    if folder.endswith(("contacts", "groups")):
        first = text.rng.choice(NAMES)
        return f"{first}-{text.rng.choice(NAMES)}-{i}"
    return "-".join(text.content_words(2)) + f"-{i}"


def generate_workspace(
    root: Path, memory_files: int = 10_000, days: int = 3 * 365, seed: int = 1
) -> Generated:
    """Initialize `root` and fill it with `memory_files` notes and `days` daily logs."""
    init_workspace(root)
    text = _Text(random.Random(seed))
    out = Generated(root)
    start = date(2026, 11, 30) - timedelta(days=days)
    for i in range(memory_files):
        folder = FOLDERS[i % len(FOLDERS)]
        name = _name(text, folder, i)
        recorded = start + timedelta(days=text.rng.randrange(max(days, 1)))
        rel = f"{folder}/{name}.md"
        (root / rel).write_text(memory_file(text, folder, name, recorded), "utf-8")
        out.memory_files.append(rel)
    for d in range(days):
        day = start + timedelta(days=d + 1)
        rel = f"memory/{day.isoformat()}.md"
        (root / rel).write_text(daily_log(text, day), "utf-8")
        out.daily_files.append(rel)
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1])
    made = generate_workspace(target, int(sys.argv[2]) if len(sys.argv) > 2 else 10_000)
    print(f"{len(made.memory_files)} memory files, {len(made.daily_files)} daily logs in {target}")
