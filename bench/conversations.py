"""Generated multi-session conversations written as daily logs, with planted facts and questions.

`generate(root, seed)` writes a workspace's daily logs (`memory/YYYY-MM-DD.md`: one `# date`
line, one `### [HH:MM] topic` block per session, one `- **Name**: text` line per turn) for a few
pairs of people who talk every few days over a year and a half, plus the distractors a real
workspace has: README.md, AGENTS.md, memory/.system/ instructions and a few knowledge notes that
use the questions' words. Most turns are small talk drawn from templates full of the words
questions use (name, class, dinner, sister, new, bought…), so a question's words alone do not
find its evidence. Planted facts come with questions of four kinds:

- `single`: one fact in one turn, often the answer to the other person's question, so the turn
  that matches the question's words is not the one that answers it;
- `spread`: one topic a person comes back to in two or three sessions; all of them are needed
  for the answer;
- `when`: "when did …" (the answer is the session's date), or a question about a recurring
  activity scoped by a date ("on 3 May 2023", "2023-05-03", "in May 2023", "last week");
- `reworded`: a single fact asked in other words than the evidence's (synonyms, no shared
  content word but the person's name);
- `answer`: the other person asks or says something in the question's words, and the person's
  reply (the evidence) shares none of them: not always a line ending with "?" (a question
  mid-line, or a remark the reply answers);
- `paraphrase`: the same exchanges asked in other words than either turn's.

Every question names its evidence as (path, 1-based line). The same seed gives the same bytes.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

KINDS = ("single", "spread", "when", "reworded", "answer", "paraphrase")
PEOPLE = (
    ("Caroline", "Melanie"),
    ("Priya", "Joe"),
    ("Marta", "Daniel"),
    ("Ana", "Tomas"),
)
START = date(2023, 1, 9)

# ---------------------------------------------------------------- small talk

FILLER = (
    "{A}: How was your weekend, {B}?",
    "{B}: Pretty quiet, I mostly stayed home and watched a {show} series.",
    "{A}: Work has been busy, we have a deadline on {weekday}.",
    "{B}: Did you try that new {food} place near the station?",
    "{A}: The weather is {weather} again, I might skip my run.",
    "{B}: My {relative} called yesterday, they want to visit soon.",
    "{A}: I need to remember to buy {grocery} on the way home.",
    "{B}: Have you heard from {C} lately?",
    "{A}: Not really, I think {C} has been travelling for work.",
    "{B}: What did you have for lunch today?",
    "{A}: Just a {food} sandwich at my desk, nothing special.",
    "{B}: I'm thinking about taking a class this autumn, maybe something creative.",
    "{A}: That sounds great, you should go for it.",
    "{B}: My sister says hi, by the way.",
    "{A}: Tell her I said hello! What is she up to these days?",
    "{B}: She is busy with her new job, she barely has time for anything.",
    "{A}: I cooked dinner for friends on {weekday}, it went well.",
    "{B}: We should plan a trip somewhere when it gets warmer.",
    "{A}: Yes! Maybe the coast, or the mountains.",
    "{B}: I bought a new {gadget} but I have not set it up yet.",
    "{A}: Did you ever finish that book you were reading?",
    "{B}: Not yet, I keep falling asleep after a few pages.",
    "{A}: What's the name of that {show} show you mentioned?",
    "{B}: I forgot the name, I'll send it to you later.",
    "{A}: I moved my desk next to the window, much better light.",
    "{B}: My neighbour's dog barked all night, I barely slept.",
    "{A}: When are you free next week?",
    "{B}: {weekday} evening works for me.",
    "{A}: I have been trying to drink more water and sleep earlier.",
    "{B}: Good plan. I keep saying I will start running again.",
    "{A}: Did you see the photos from the party?",
    "{B}: Yes, everyone looked so happy.",
    "{A}: I am so tired today, long meeting this morning.",
    "{B}: Hang in there, it is almost the weekend.",
    "{A}: What are you cooking tonight?",
    "{B}: Probably just pasta, I am too lazy for anything else.",
    "{A}: Thanks for listening, I really needed to talk.",
    "{B}: Any time, that is what friends are for.",
    "{A}: I learned something new at work today about {topic}.",
    "{B}: Nice, you always like learning about {topic}.",
    "{A}: Remember when we went to {city} together?",
    "{B}: Of course, that was such a fun weekend.",
    "{A}: My {relative} wants me to visit more often.",
    "{B}: Family is important, you should go when you can.",
    "{A}: My cousin started a pottery class too, she loves it.",
    "{B}: There is a free concert in the park on {weekday}.",
    "{A}: The garden needs weeding again, it never ends.",
    "{B}: We played board games all evening with the neighbours.",
    "{A}: Someone at work is training for a charity race.",
    "{B}: The view from the lighthouse cafe is lovely in winter.",
    "{A}: My {relative} finally got a promotion, after ten years.",
    "{B}: Driving in the city is a nightmare, I take the bus now.",
    "{A}: Our neighbours moved into a new flat across town.",
    "{B}: I saw a cute puppy at the shelter, but we have no room.",
    "{A}: Learning an instrument as an adult is hard, my {relative} says.",
)
SLOTS: dict[str, tuple[str, ...]] = {
    "show": ("crime", "cooking", "nature", "history", "comedy", "science"),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
    "food": ("thai", "ramen", "falafel", "pizza", "tapas", "curry"),
    "weather": ("grey", "rainy", "windy", "freezing", "humid"),
    "relative": ("mum", "dad", "aunt", "cousin", "grandmother", "uncle"),
    "grocery": ("milk", "eggs", "bread", "coffee", "apples"),
    "gadget": ("phone", "laptop", "speaker", "camera", "watch"),
    "topic": ("databases", "marketing", "accounting", "design", "logistics"),
    "city": ("Porto", "Lyon", "Krakow", "Ghent", "Bologna", "Seville"),
}
SESSION_TOPICS = ("catching up", "evening chat", "weekend plans", "quick call", "news", "long talk")

# ---------------------------------------------------------------- planted facts

# (question, evidence turns, reworded question); `{A}` is the person, `{B}` the other one.
# An evidence turn prefixed with "Q:" is the other person's question: written, not evidence.
SINGLE = (
    (
        "What did {A} name the {animal} adopted from the shelter?",
        [
            "Q:{B}: Did you end up adopting that {animal} from the shelter?",
            "{A}: Yes! We named her {pet}, she already sleeps on my bed.",
        ],
        "What is {A}'s new pet called?",
    ),
    (
        "Where did {A}'s sister move for her job?",
        ["{A}: My sister just moved to {far} for a job at a {firm} firm."],
        "Which town does the sibling of {A} live in now?",
    ),
    (
        "What instrument is {A} learning?",
        [
            "Q:{B}: Which instrument are you learning these days?",
            "{A}: The {instrument}, I practise every evening after work.",
        ],
        "What music lessons does {A} take?",
    ),
    (
        "What colour is {A}'s car?",
        ["{A}: We finally bought a car, a {colour} {brand} estate."],
        "Which shade is the automobile {A} purchased?",
    ),
    (
        "What is the name of the bakery {A} opened?",
        ["{A}: The bakery opens next month, we are calling it {bakery}."],
        "What is the shop {A} launched called?",
    ),
    (
        "Which language is {A} studying at evening school?",
        [
            "Q:{B}: What language are you studying at the evening school?",
            "{A}: {language}, the teacher is strict but very good.",
        ],
        "What tongue does {A} take night lessons in?",
    ),
    (
        "What did {A}'s doctor say about the knee injury?",
        ["{A}: The doctor said my knee injury needs {treatment} for six weeks."],
        "What did the physician tell {A} about the hurt leg joint?",
    ),
    (
        "What is the title of the novel {A} is writing?",
        ["{A}: I have started writing a novel, working title {novel}."],
        "What is the book {A} is authoring called?",
    ),
    (
        "Which charity does {A} volunteer for?",
        [
            "Q:{B}: Which charity do you volunteer for on Saturdays?",
            "{A}: {charity}, I help sort donations there.",
        ],
        "What nonprofit does {A} give free time to?",
    ),
    (
        "What did {A} win at the photography contest?",
        ["{A}: My photo of the harbour won {prize} at the photography contest!"],
        "What award did {A} get for a picture?",
    ),
)
# (question, [the other person's turn, the reply: the evidence], paraphrase); the reply repeats
# none of the question's content words, only the speaker's name is on its line.
ANSWER = (
    (
        "How did {A}'s job interview go?",
        [
            "Q:{B}: How did the job interview go? I was thinking of you all day.",
            "{A}: They offered it to me on the spot, I start in {month}.",
        ],
        "Was {A} hired after meeting the recruiters?",
    ),
    (
        "Where did {A} go on the honeymoon?",
        [
            "Q:{B}: I still want to hear all about the honeymoon.",
            "{A}: {island} was magical, we swam every morning.",
        ],
        "Which place did {A} travel to after getting married?",
    ),
    (
        "What sport does {A}'s son play at school?",
        [
            "Q:{B}: Does your son play any sport at school? He seems so energetic.",
            "{A}: {sport}, he trains twice a week and loves it.",
        ],
        "Which game is {A}'s boy on a team for?",
    ),
    (
        "Why did {A} cancel the camping trip?",
        [
            "Q:{B}: Shame about the camping trip being cancelled.",
            "{A}: The forecast showed {storm} all weekend, not worth the risk.",
        ],
        "What made {A} call off sleeping in a tent outdoors?",
    ),
    (
        "What is {A} allergic to?",
        [
            "Q:{B}: Wait, what are you allergic to again? I want to get the menu right.",
            "{A}: {allergen}, even a trace makes my throat swell.",
        ],
        "Which food gives {A} a bad reaction?",
    ),
    (
        "How many people came to {A}'s birthday party?",
        [
            "Q:{B}: So how many people turned up to your birthday party in the end?",
            "{A}: About {count}, more than I expected, the flat was packed.",
        ],
        "How big was the crowd at {A}'s celebration?",
    ),
)
FACTS = ((SINGLE, "single", "reworded"), (ANSWER, "answer", "paraphrase"))
SLOT_FACTS: dict[str, tuple[str, ...]] = {
    "animal": ("puppy", "kitten", "rabbit"),
    "pet": ("Biscuit", "Pepper", "Juniper", "Mochi", "Waffles", "Clementine", "Pickle", "Nori"),
    "far": ("Edinburgh", "Toronto", "Melbourne", "Nairobi", "Oslo", "Santiago", "Osaka"),
    "firm": ("law", "shipping", "biotech", "architecture", "insurance"),
    "instrument": ("cello", "clarinet", "ukulele", "trombone", "harp", "banjo"),
    "colour": ("teal", "burgundy", "mustard", "silver", "olive"),
    "brand": ("Volvo", "Skoda", "Subaru", "Peugeot"),
    "bakery": ("Crumb and Co", "Rise Up", "The Flour Pot", "Golden Crust", "Knead More"),
    "language": ("Portuguese", "Japanese", "Welsh", "Turkish", "Korean", "Dutch"),
    "treatment": ("physiotherapy", "complete rest", "a brace", "daily icing"),
    "novel": ("The Salt Road", "Glass Orchard", "Nine Lanterns", "Winter Harbour"),
    "charity": ("Open Kitchen", "Paws Rescue", "Green Streets", "Reading Buddies"),
    "prize": ("first place", "a runner-up medal", "the judges' award", "a gift voucher"),
    "month": ("March", "April", "June", "September", "October"),
    "island": ("Crete", "Madeira", "Sardinia", "Mallorca", "Corsica", "Gozo"),
    "sport": ("Hockey", "Rugby", "Basketball", "Volleyball", "Badminton", "Fencing"),
    "storm": ("thunderstorms", "gales", "heavy snow", "hailstorms"),
    "allergen": ("Peanuts", "Shellfish", "Sesame", "Kiwi", "Walnuts", "Mustard seeds"),
    "count": ("forty", "thirty", "fifty", "twenty-five", "sixty"),
}
# (topic question, reworded, evidence turns: one per session, `{x}` a fresh detail each time)
SPREAD = (
    (
        "What has {A} made in pottery class?",
        (
            "{A}: In pottery class today I made a {x}.",
            "{A}: My pottery teacher loved the {x} I glazed.",
            "{A}: Pottery class again, this time a {x}, a bit wonky.",
        ),
        ("bowl", "vase", "mug", "teapot", "plate", "jug"),
    ),
    (
        "Which cities has {A} visited for concerts?",
        (
            "{A}: I went to {x} for a concert, the band was brilliant.",
            "{A}: Another concert trip, this time to {x}.",
            "{A}: Just back from a concert in {x}, my ears are still ringing.",
        ),
        ("Vienna", "Prague", "Dublin", "Berlin", "Lisbon", "Madrid"),
    ),
    (
        "What plants has {A} grown in the garden?",
        (
            "{A}: The garden is full of {x} this year.",
            "{A}: I planted {x} in the garden at the weekend.",
            "{A}: My {x} in the garden finally came up.",
        ),
        ("tomatoes", "courgettes", "sunflowers", "beans", "lavender", "peppers"),
    ),
    (
        "Which board games has {A} bought?",
        (
            "{A}: I bought a board game called {x}, it is very strategic.",
            "{A}: New board game for the collection: {x}.",
            "{A}: We played {x}, the board game I bought last month.",
        ),
        ("Azul", "Carcassonne", "Wingspan", "Patchwork", "Splendor", "Cascadia"),
    ),
)
# (event question, evidence turn, also said in other sessions with other words)
WHEN = (
    ("When did {A} run the charity race?", "{A}: I ran the charity race this morning, so proud."),
    ("When did {A} get the promotion?", "{A}: Big news, I got the promotion at work today!"),
    ("When did {A} go to the lighthouse?", "{A}: We walked out to the lighthouse this afternoon."),
    ("When did {A} pass the driving test?", "{A}: I passed my driving test, first attempt!"),
    ("When did {A} move into the new flat?", "{A}: Moving day! The new flat is full of boxes."),
)
RECURRING = ("{A}: For dinner tonight I cooked {x}.", "What did {A} cook for dinner")
DISHES = (
    "lentil soup",
    "mushroom risotto",
    "fish tacos",
    "chicken curry",
    "vegetable lasagne",
    "pad thai",
    "shakshuka",
    "beef stew",
    "gnocchi",
    "paella",
    "dumplings",
    "ratatouille",
    "stuffed peppers",
    "salmon with rice",
    "bean chilli",
    "pumpkin soup",
    "moussaka",
)


@dataclass(frozen=True)
class Question:
    kind: str
    text: str
    evidence: tuple[tuple[str, int], ...]  # (path, 1-based line)


@dataclass
class _Session:
    day: date
    hhmm: str
    topic: str
    turns: list[str] = field(default_factory=list)
    line_of: list[int] = field(default_factory=list)  # each turn's 1-based line, once written


@dataclass
class Bench:
    """The generated data: questions, the `now` they are asked at, and every log line."""

    questions: list[Question]
    now: datetime
    files: dict[str, list[str]]


def _fill(rng: random.Random, template: str, names: dict[str, str]) -> str:
    return template.format(**names, **{k: rng.choice(v) for k, v in SLOTS.items()})


def _schedule(rng: random.Random, sessions: int) -> list[tuple[date, str]]:
    day = START + timedelta(days=rng.randrange(4))
    out = []
    for _ in range(sessions):
        out.append((day, f"{rng.randrange(7, 23):02d}:{rng.choice((5, 20, 35, 50)):02d}"))
        day += timedelta(days=rng.randrange(4, 18))
    return out


def _plan(rng: random.Random, sessions: int, turns: int) -> dict[str, list[_Session]]:
    out: dict[str, list[_Session]] = {}
    for a, b in PEOPLE:
        pair = f"{a}-{b}"
        out[pair] = [
            _Session(day, hhmm, rng.choice(SESSION_TOPICS))
            for day, hhmm in _schedule(rng, sessions)
        ]
        others = [p for pair2 in PEOPLE for p in pair2 if p not in (a, b)]
        for s in out[pair]:
            for i in range(turns):
                names = {"A": a, "B": b, "C": rng.choice(others)}
                if i % 2:
                    names = {"A": b, "B": a, "C": names["C"]}
                s.turns.append(_fill(rng, rng.choice(FILLER), names))
    return out


def generate(root: Path, seed: int = 7, sessions: int = 40, turns: int = 24) -> Bench:
    """Write the daily logs and distractors under `root` (an existing workspace or a folder)."""
    rng = random.Random(seed)
    plan = _plan(rng, sessions, turns)
    # (kind, question, [(session, indexes of its evidence turns)])
    marks: list[tuple[str, str, list[tuple[_Session, list[int]]]]] = []

    def plant(s: _Session, lines: list[str]) -> list[int]:
        """Insert lines at one place in the session; returns the indexes of the evidence."""
        at = rng.randrange(1, len(s.turns))
        ev = []
        for k, line in enumerate(lines):
            s.turns.insert(at + k, line.removeprefix("Q:"))
            if not line.startswith("Q:"):
                ev.append(at + k)
        for _, _, pairs in marks:  # keep earlier marks pointing at their lines
            for where, turns in pairs:
                if where is s:
                    turns[:] = [t + len(lines) if t >= at else t for t in turns]
        return ev

    used: set[str] = set()

    def fresh(slot: str) -> str:
        choices = [v for v in SLOT_FACTS[slot] if v not in used] or list(SLOT_FACTS[slot])
        value = rng.choice(choices)
        used.add(value)
        return value

    for pair, sess in plan.items():
        a, b = pair.split("-")
        for person, other in ((a, b), (b, a)):
            names = {"A": person, "B": other}
            # single facts and reworded ones, then answers that repeat none of the question's
            # words and their paraphrases: each template once per person, half of each kind
            for templates, said, other_words in FACTS:
                for k, (question, lines, reworded) in enumerate(templates):
                    values = {slot: fresh(slot) for slot in SLOT_FACTS}
                    text = [line.format(**names, **values) for line in lines]
                    s = rng.choice(sess)
                    kind = said if (k + len(person)) % 2 else other_words
                    asked = (question if kind == said else reworded).format(**names, **values)
                    marks.append((kind, asked, [(s, plant(s, text))]))
            # spread: two of the topics, over two or three sessions each
            for question, templates, details in rng.sample(SPREAD, 3):
                picks = rng.sample(range(len(sess)), rng.choice((2, 3)))
                xs = rng.sample(details, len(picks))
                spread: list[tuple[_Session, list[int]]] = []
                marks.append(("spread", question.format(**names), spread))
                for n, (idx, x) in enumerate(zip(picks, xs, strict=True)):
                    line = templates[n % len(templates)].format(**names, x=x)
                    spread.append((sess[idx], plant(sess[idx], [line])))
            # when: one event, and a recurring dinner asked about by date
            for question, line in rng.sample(WHEN, 2):
                s = rng.choice(sess)
                ev = plant(s, [line.format(**names)])
                marks.append(("when", question.format(**names), [(s, ev)]))
    # recurring dinners: in a third of each person's sessions, asked about by date
    now_day = max(s.day for sess in plan.values() for s in sess) + timedelta(days=1)
    now = datetime(now_day.year, now_day.month, now_day.day, 12, 0)
    for pair, sess in plan.items():
        for person in pair.split("-"):
            names = {"A": person}
            cooked = rng.sample(range(len(sess)), max(3, len(sess) // 3))
            dated: list[tuple[_Session, list[int]]] = []
            for idx in cooked:
                line = RECURRING[0].format(**names, x=rng.choice(DISHES))
                dated.append((sess[idx], []))
                marks.append(("", "", [dated[-1]]))  # tracked while later lines go in
                dated[-1][1][:] = plant(sess[idx], [line])
            for s, ev in rng.sample(dated, min(3, len(dated))):
                asked = _dated_question(rng, person, s.day, dated, now_day)
                marks.append(("when", asked, [(s, ev)]))
    files = _write(root, plan, now_day)
    questions = [_question(kind, text, pairs) for kind, text, pairs in marks if kind]
    _distractors(root)
    return Bench(questions, now, files)


def _dated_question(
    rng: random.Random, person: str, day: date, dated: list[tuple[_Session, list[int]]], now: date
) -> str:
    """Ask by the most natural form of the date that still names one session only."""
    stem = RECURRING[1].format(A=person)
    days = [s.day for s, _ in dated]
    same_month = [d for d in days if (d.year, d.month) == (day.year, day.month)]
    if 0 < (now - day).days <= 7 and sum(0 < (now - d).days <= 7 for d in days) == 1:
        return f"{stem} last week?"
    if len(same_month) == 1 and rng.random() < 0.5:
        return f"{stem} in {day:%B %Y}?"
    if rng.random() < 0.5:
        return f"{stem} on {day.isoformat()}?"
    return f"{stem} on {day.day} {day:%B %Y}?"


def _write(root: Path, plan: dict[str, list[_Session]], now: date) -> dict[str, list[str]]:
    by_day: dict[date, list[_Session]] = defaultdict(list)
    for sess in plan.values():
        for s in sess:
            by_day[s.day].append(s)
    files: dict[str, list[str]] = {}
    (root / "memory").mkdir(parents=True, exist_ok=True)
    for day in sorted(by_day):
        lines = [f"# {day.isoformat()}", ""]
        for s in sorted(by_day[day], key=lambda s: s.hhmm):
            lines += [f"### [{s.hhmm}] {s.topic}", ""]
            s.line_of = [len(lines) + i + 1 for i in range(len(s.turns))]
            for turn in s.turns:
                name, text = turn.split(": ", 1)
                lines.append(f"- **{name}**: {text}")
            lines.append("")
        rel = f"memory/{day.isoformat()}.md"
        files[rel] = lines
        (root / rel).write_text("\n".join(lines), "utf-8")
    return files


def _question(kind: str, text: str, pairs: list[tuple[_Session, list[int]]]) -> Question:
    evidence = tuple(
        (f"memory/{s.day.isoformat()}.md", s.line_of[t]) for s, ts in pairs for t in ts
    )
    return Question(kind, text, evidence)


def _distractors(root: Path) -> None:
    """Scaffold and notes that share the questions' words but answer none of them."""
    texts = {
        "README.md": "# Workspace\n\nThis is where the agent keeps what it learned. Ask what "
        "did someone say, when did it happen, which name, what colour: search the daily logs.\n",
        "AGENTS.md": "# Agents\n\nWhen the user asks what happened, where they moved, which "
        "class, what they bought or cooked for dinner, look it up before answering. Name the "
        "date of the session when the user asks when something happened.\n",
        "memory/.system/CURATE.md": "# Curate\n\nRoute each fact: a new pet, a sister's job, a "
        "car they bought, a class, a language, a dinner, a promotion, a race.\n",
        "knowledge/topics/pottery.md": "# Pottery\n\nA pottery class usually makes a bowl first, "
        "then a mug, a vase or a plate; glazing comes last.\n",
        "knowledge/topics/cooking.md": "# Cooking\n\nDinner ideas: soup, risotto, curry, tacos, "
        "stew. Cook for friends on Friday.\n",
        "knowledge/topics/cars.md": "# Cars\n\nWhen you buy a car, check the colour in daylight.\n",
    }
    for rel, text in texts.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
