"""The QA bench's conversation: two friends over four months, with planted facts and questions.

Maya (who is opening a bakery) and Jonas (three children, a new job) talk in a chat their agent,
Pip, sits in. Each session is a list of planted turns (the facts questions ask about, some said
relatively: "yesterday", "last Sunday", "Friday next week") between which `qa_bench` mixes small
talk, seeded. Kinds of question, as LoCoMo names them: `single` (one turn answers it), `temporal`
(a date, often said relatively, so the answer is the session's date moved), `multi` (two
sessions are needed: a contradiction resolved by the later one, a sum of dates, a name and a
place said months apart). Answers are short, as LoCoMo's are, so token F1 means something.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class Session:
    """One chat: when it started (UTC), which agent's transcript holds it, and its planted turns
    as (speaker, text); speaker `Pip` is the agent answering in the chat."""

    start: str
    kind: str  # "openclaw" or "claude_code"
    turns: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Question:
    id: str
    kind: str  # single, temporal, multi
    question: str
    answer: str
    sessions: tuple[int, ...]  # 1-based sessions holding the evidence


SESSIONS: tuple[Session, ...] = (
    Session(
        "2026-06-02T19:10:00Z",
        "openclaw",
        (
            ("Maya", "Hey Jonas, how was your long weekend?"),
            ("Jonas", "Chaotic. With three kids under ten every weekend is chaos, honestly."),
            ("Maya", "Ha, I believe it. Are you still reading anything or is that hopeless?"),
            (
                "Jonas",
                "A bit every night. My sister lent me The Salt Orchard by Ines Varga, it's "
                "about a family running a lemon farm. Slow but lovely.",
            ),
            (
                "Maya",
                "I went to the open studio at the pottery place on Keller Street yesterday. "
                "I made a very wonky bowl.",
            ),
            ("Jonas", "A wonky bowl is still a bowl. Will you go back?"),
            ("Maya", "Maybe. I liked getting my hands dirty, it was oddly calming."),
        ),
    ),
    Session(
        "2026-06-14T20:30:00Z",
        "openclaw",
        (
            (
                "Maya",
                "Can I tell you something I haven't told anyone? I'm seriously thinking about "
                "leaving the agency and opening a bakery in Harbourside.",
            ),
            ("Jonas", "Wow. Harbourside, near the old ferry terminal?"),
            ("Maya", "Yes, there's an empty shop on the corner of Dock Lane."),
            (
                "Jonas",
                "Honestly I think it's brave, and you'd be good at it. But keep two days a "
                "week at the agency for the first year, so you still have an income.",
            ),
            ("Maya", "That's fair. I'll think about it."),
            ("Jonas", "Other news: Elsa started violin lessons this week."),
            ("Maya", "How is she finding it?"),
            ("Jonas", "Loud. Very loud. But she practises every day without being asked."),
        ),
    ),
    Session(
        "2026-06-27T11:05:00Z",
        "claude_code",
        (
            ("Maya", "Pip, Jonas is here with me, we're doing the bakery numbers."),
            ("Pip", "Hi both. Tell me what you want to work out and I'll keep track."),
            (
                "Maya",
                "Before that, I ran the city half marathon last Sunday! Finished in 1 hour 58 "
                "minutes.",
            ),
            ("Jonas", "Under two hours, I told you you could do it."),
            ("Maya", "My knees disagree. Anyway, we went past the farmers market this morning."),
            (
                "Jonas",
                "Tell Pip about the sign at the farmers market, it was the best thing all week.",
            ),
            ("Maya", "The sign at the entrance said: No dogs, except good ones."),
            ("Pip", "That's a good sign. Shall we start with the rent and the equipment?"),
            ("Maya", "Yes, but I don't have the landlord's figure yet."),
        ),
    ),
    Session(
        "2026-07-09T21:00:00Z",
        "openclaw",
        (
            ("Maya", "How was your brother's wedding last Saturday?"),
            (
                "Jonas",
                "Beautiful venue, but honestly I felt left out. Everyone else gave a speech and "
                "nobody asked me to.",
            ),
            ("Maya", "Oh no, that stings. Did you say anything to him?"),
            ("Jonas", "Not yet. Maybe once they're back from the honeymoon."),
            (
                "Maya",
                "Bakery news: the landlord wants 2,400 euros a month for the Dock Lane shop.",
            ),
            ("Jonas", "That's steep but it's a good corner. Have you picked a name?"),
            ("Maya", "I think so: Crumb & Compass. Because of the harbour."),
            ("Jonas", "I love it. It sounds like a place with good coffee."),
            ("Maya", "Pip, remind us to read the lease draft on Monday."),
            ("Pip", "Noted: read the lease draft on Monday."),
        ),
    ),
    Session(
        "2026-07-23T19:45:00Z",
        "openclaw",
        (
            ("Jonas", "Update from our house: Elsa gave up on it. She plays the clarinet now."),
            ("Maya", "Really? What happened?"),
            ("Jonas", "She says the clarinet is less squeaky. Her teacher switched her last week."),
            (
                "Maya",
                "My mum is coming to visit on Friday next week, so I'll finally show her the shop.",
            ),
            ("Jonas", "Does she know about the bakery yet?"),
            ("Maya", "Not really. I'm a bit nervous about telling her."),
        ),
    ),
    Session(
        "2026-08-08T10:20:00Z",
        "claude_code",
        (
            ("Maya", "Pip, big day: I signed the lease this morning. Jonas came along."),
            ("Pip", "Congratulations! Do you want me to note the move-in steps?"),
            ("Maya", "Later. First: my mum saw the shop last week."),
            ("Jonas", "And? What did she say?"),
            (
                "Maya",
                "She thinks the whole bakery plan is reckless. She kept asking about my pension.",
            ),
            (
                "Maya",
                "I did take your advice though: I told the agency I'm going down to two days a "
                "week.",
            ),
            (
                "Jonas",
                "Good. We're off to Tavira in Portugal in two weeks, the kids are counting the "
                "days.",
            ),
            ("Maya", "Send me pictures of the beach!"),
        ),
    ),
    Session(
        "2026-08-30T18:00:00Z",
        "openclaw",
        (
            ("Maya", "You're back! How was Portugal?"),
            (
                "Jonas",
                "Great, apart from Mats getting stung by a jellyfish on the second day. He was "
                "very brave about it.",
            ),
            ("Maya", "Poor Mats! Is he alright?"),
            ("Jonas", "Totally fine, now he tells everyone it was a shark."),
            (
                "Maya",
                "Here the oven arrived. It cost 6,800 euros, the biggest thing I have ever "
                "bought apart from my flat.",
            ),
            (
                "Maya",
                "And the first poster for the window is done. It says: Bread for the whole street.",
            ),
            ("Jonas", "Simple. I like it."),
            (
                "Maya",
                "I'm reading Flour Water Salt Yeast in the evenings to get my timing right.",
            ),
        ),
    ),
    Session(
        "2026-09-12T09:30:00Z",
        "openclaw",
        (
            (
                "Jonas",
                "Elsa's clarinet concert was last night. I was so proud I cried a bit, don't "
                "tell anyone.",
            ),
            ("Maya", "That's lovely, your secret is safe."),
            (
                "Maya",
                "We open two weeks from today! I hired a baker, Tomasz, he used to work at "
                "Forno Verde.",
            ),
            ("Jonas", "Two weeks! Are you ready?"),
            ("Maya", "No. Yes. Ask me again next week."),
        ),
    ),
    Session(
        "2026-09-27T20:10:00Z",
        "openclaw",
        (
            ("Jonas", "So? How was opening day yesterday?"),
            (
                "Maya",
                "Exhausted but happy. We sold 140 cinnamon buns and they were gone by eleven.",
            ),
            ("Jonas", "140! You'll need a second oven."),
            ("Maya", "I'm thinking of opening on Sundays too, people kept asking."),
            (
                "Jonas",
                "Honestly I think opening on Sundays would be a mistake, you need one day off "
                "or you'll burn out.",
            ),
            ("Maya", "You're probably right. Tomasz said the same."),
        ),
    ),
    Session(
        "2026-10-10T15:00:00Z",
        "openclaw",
        (
            ("Maya", "How was Mats's birthday?"),
            (
                "Jonas",
                "He turned five on Thursday and we had eleven kids in the garden. Never again.",
            ),
            (
                "Jonas",
                "Also, I'm leaving the insurance company. I start at Spoke & Chain, the bike "
                "shop by the canal, in November.",
            ),
            ("Maya", "Finally! You've talked about bikes for years."),
            ("Jonas", "How's Crumb & Compass doing after two weeks?"),
            ("Maya", "Busy. Tomasz wants to add rye bread, we're testing recipes."),
        ),
    ),
)

# Two lines a question: `id | kind | evidence sessions | question`, then `= answer`.
_QUESTION_TABLE = """
s01 | single | 1 | What book was Jonas reading that his sister lent him?
    = The Salt Orchard by Ines Varga
s02 | single | 1 | How many children does Jonas have?
    = three
s03 | single | 3 | What did the sign at the farmers market say?
    = No dogs, except good ones
s04 | single | 4 | How did Jonas feel at his brother's wedding?
    = left out, nobody asked him to give a speech
s05 | single | 2 | What does Jonas think of Maya's plan to open a bakery?
    = brave, but she should keep two days a week at the agency for the first year
s06 | single | 2 | In which part of town did Maya want to open her bakery?
    = Harbourside
s07 | single | 3 | How long did Maya take to finish the half marathon?
    = 1 hour 58 minutes
s08 | single | 4 | How much is the monthly rent of the bakery's shop?
    = 2,400 euros
s09 | single | 4 | What name did Maya choose for the bakery?
    = Crumb & Compass
s10 | single | 6 | What does Maya's mother think of the bakery plan?
    = reckless
s11 | single | 6 | Where did Jonas's family go on holiday in August?
    = Tavira, Portugal
s12 | single | 7 | Which of Jonas's children got stung by a jellyfish?
    = Mats
s13 | single | 7 | What does the first poster for the bakery window say?
    = Bread for the whole street
s14 | single | 7 | How much did the bakery's oven cost?
    = 6,800 euros
s15 | single | 8 | Who did Maya hire as her baker?
    = Tomasz
s16 | single | 9 | How many cinnamon buns did the bakery sell on opening day?
    = 140
s17 | single | 8 | How did Jonas feel at Elsa's clarinet concert?
    = so proud he cried
s18 | single | 10 | Where will Jonas work from November?
    = Spoke & Chain, the bike shop by the canal
s19 | single | 7 | Which baking book is Maya reading?
    = Flour Water Salt Yeast
s20 | single | 9 | How did Maya feel after the bakery's opening day?
    = exhausted but happy
s21 | single | 9 | What does Jonas think of opening the bakery on Sundays?
    = a mistake, she needs one day off or she will burn out
s22 | single | 8 | Where did Tomasz work before?
    = Forno Verde
s23 | single | 2 | Which instrument did Elsa start lessons on in June?
    = violin
t01 | temporal | 1 | When did Maya go to the open studio at the pottery place?
    = 1 June 2026
t02 | temporal | 3 | When did Maya run the half marathon?
    = 21 June 2026
t03 | temporal | 4 | When was Jonas's brother's wedding?
    = 4 July 2026
t04 | temporal | 5 | When did Maya's mother come to visit?
    = 31 July 2026
t05 | temporal | 6 | When did Maya sign the lease for the shop?
    = 8 August 2026
t06 | temporal | 6 | When did Jonas's family leave for Portugal?
    = 22 August 2026
t07 | temporal | 8,9 | When did Maya's bakery open?
    = 26 September 2026
t08 | temporal | 10 | When did Mats turn five?
    = 8 October 2026
t09 | temporal | 8 | When was Elsa's clarinet concert?
    = 11 September 2026
t10 | temporal | 5 | When did Elsa switch to the clarinet?
    = mid July 2026
m01 | multi | 2,5 | Which instrument does Elsa play now?
    = clarinet
m02 | multi | 2,5 | Which instrument did Elsa give up?
    = violin
m03 | multi | 3,4 | How many days after the half marathon was Jonas's brother's wedding?
    = 13 days
m04 | multi | 2,4 | What is the name of Maya's bakery and in which part of town is it?
    = Crumb & Compass, Harbourside
m05 | multi | 7,10 | How old was Mats when he was stung by a jellyfish?
    = four
m06 | multi | 2,6 | Did Maya follow Jonas's advice about keeping her agency job?
    = yes, she went down to two days a week at the agency
m07 | multi | 6,7 | In which town was Mats stung by a jellyfish?
    = Tavira, Portugal
m08 | multi | 6,8 | How many weeks after signing the lease did the bakery open?
    = 7 weeks
m09 | multi | 9 | Do Jonas and Tomasz agree about opening the bakery on Sundays?
    = yes, both think it would be a mistake
"""
_LINES = _QUESTION_TABLE.strip().splitlines()
QUESTIONS: tuple[Question, ...] = tuple(
    Question(qid, kind, question, answer.strip().removeprefix("= "), tuple(map(int, ns.split(","))))
    for (qid, kind, ns, question), answer in zip(
        ([cell.strip() for cell in line.split("|")] for line in _LINES[::2]),
        _LINES[1::2],
        strict=True,
    )
)

# Small talk between the planted turns: (speaker, text) pairs, drawn seeded per session.
FILLER: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = (
    (("Maya", "The weather has been so grey this week."), ("Jonas", "Same here, I miss the sun.")),
    (("Jonas", "Did you watch the match on Tuesday?"), ("Maya", "Only the second half, sadly.")),
    (("Maya", "I need to buy coffee on the way home."), ("Jonas", "Get the good one this time.")),
    (("Jonas", "Work is busy, we have a deadline on Friday."), ("Maya", "Hang in there.")),
    (("Maya", "My neighbour's dog barked all night."), ("Jonas", "Earplugs. Trust me.")),
    (("Maya", "I keep saying I'll sleep earlier and then I don't."), ("Jonas", "Classic.")),
    (("Jonas", "The car needs new tyres again."), ("Maya", "Cars are a money pit.")),
    (("Maya", "Have you heard from Lena lately?"), ("Jonas", "Not really, she's travelling.")),
    (("Jonas", "I fixed the squeaky door finally."), ("Maya", "A true hero of the household.")),
    (("Maya", "What are you cooking tonight?"), ("Jonas", "Pasta, as always on weeknights.")),
    (("Jonas", "The garden needs weeding again."), ("Maya", "It never ends, does it?")),
    (
        ("Maya", "I cleaned out my wardrobe, three bags for the charity shop."),
        ("Jonas", "Very virtuous."),
    ),
    (
        ("Jonas", "Traffic on the ring road was terrible this morning."),
        ("Maya", "I take the tram now, no regrets."),
    ),
    (
        ("Maya", "There's a free concert in the park next month."),
        ("Jonas", "Let's see if we can make it."),
    ),
    (("Jonas", "My phone screen cracked again."), ("Maya", "Get a proper case this time!")),
    (("Maya", "I found a great podcast about old ships."), ("Jonas", "Send me the link.")),
)


# ---------------------------------------------------------------- the long conversation
#
# Issue 35's held-out conversation was 19 sessions over five months, 419 turns: long enough that
# collect needs several chunks and that search over raw logs drowns in small talk. `long_set`
# builds one of that shape from the pools below, seeded: Lena and Omar, sixteen sessions from
# March to August 2026, each a few planted facts (drawn from every kind the issue lists) between
# small talk, some of it about the same topics (other books, other signs) so a keyword match is
# not enough. Every answer is computed from what was planted (dates from the session's day and
# the relative phrase said), and most answers share no word with their question.

LONG_PEOPLE = ("Lena", "Omar")
_PRONOUN = {"Lena": ("she", "her", "her"), "Omar": ("he", "him", "his")}
_BOOKS = (
    ("The Glass Harbour", "Mira Okafor", "a lighthouse keeper's daughter"),
    ("Winter in Lisbon", "Paul Arden", "two brothers who stop speaking"),
    ("The Last Cartographer", "Sofia Brandt", "a mapmaker in the 1800s"),
    ("Salt and Cedar", "Hannah Riis", "a family restaurant on an island"),
    ("Quiet Engines", "Dev Malhotra", "the people who built the first railways"),
)
_LENDERS = ("sister", "neighbour", "colleague", "aunt", "brother")
_SIGNS = (
    ("the bakery on Mill Road", "chalkboard", "Bread is love, crusts are optional"),
    ("the climbing gym", "banner", "Fall down seven times, chalk up eight"),
    ("the allotment gate", "notice", "Please close the gate, the goats are plotting"),
    ("the new ramen bar", "sign", "Slurping is a compliment"),
    ("the ferry pier", "board", "Mind the gulls, they have no manners"),
)
_CHILDREN = (("Priya", "cousin", "four"), ("Karl", "neighbour", "two"), ("Dana", "boss", "five"))
_FEELINGS = (
    ("the farewell party for Bea at the office", "sad", "she trained me when I started"),
    ("my cousin's graduation", "proud", "nobody in our family had finished university"),
    ("the school reunion", "out of place", "everyone talked about mortgages all night"),
    ("the choir audition", "terrified", "my hands were shaking the whole time"),
    ("the charity run along the river", "elated", "we raised more than we hoped"),
)
_PLANS = (
    ("moving to the coast", "rushing it, rent there for a year first"),
    (
        "selling the car and cycling to work",
        "a great idea, as long as you buy a proper rain jacket",
    ),
    ("quitting the choir", "a shame, you would miss the people more than the singing"),
    ("adopting a second cat", "chaos, the first cat would never forgive you"),
    ("taking a sabbatical in Chile", "the best idea you've had in years"),
)
_HANDLED = (
    ("the kitchen flooded", "the flooded kitchen", "called a plumber friend and mopped until 2 am"),
    (
        "the upstairs neighbours kept partying",
        "the noisy neighbours",
        "left them a polite note with earplugs taped to it",
    ),
    (
        "I lost my passport",
        "the lost passport",
        "went to the consulate with a copy of the birth certificate",
    ),
    ("our flight got cancelled", "the cancelled flight", "took the night train to Vienna instead"),
    ("the boiler broke", "the broken boiler", "showered at the climbing gym for a week"),
)
_EVENTS = (  # (what was done, as the question asks it)
    ("ran my first 10K race", "run {poss} first 10K race", "{a}'s first 10K race"),
    (
        "got the keys to the allotment",
        "get the keys to the allotment",
        "the day {a} got the allotment keys",
    ),
    (
        "had the job interview at the museum",
        "have the job interview at the museum",
        "{a}'s museum job interview",
    ),
    (
        "picked up the new bike from the shop",
        "pick up {poss} new bike",
        "the day {a} got the new bike",
    ),
    ("finally went to the dentist", "go to the dentist", "{a}'s dentist visit"),
    (
        "signed up for the pottery course",
        "sign up for the pottery course",
        "the day {a} signed up for pottery",
    ),
    ("repainted the hallway", "repaint the hallway", "the day {a} repainted the hallway"),
    (
        "went to the jazz night at the Blue Door",
        "go to the jazz night at the Blue Door",
        "{a}'s jazz night at the Blue Door",
    ),
)
_PRICES = (
    ("the bike repair", "cost me 85 euros", "85 euros"),
    ("the concert tickets", "were 62 euros each", "62 euros"),
    ("the new sofa", "cost 1,150 euros in the end", "1,150 euros"),
    ("the ferry to the island", "was 18 euros return", "18 euros"),
)
_RELATIVE = (  # (phrase, days from the session's day; None: the weekday said)
    ("yesterday", -1),
    ("the day before yesterday", -2),
    ("three days ago", -3),
    ("a week ago", -7),
    ("this morning", 0),
    ("last {weekday}", None),
)
_CHANGES = (  # (who, what is said first, what a later session says instead, questions)
    (
        "Omar",
        "My son Ravi started judo lessons this week.",
        "Ravi quit judo, he does swimming now. Says the mats smelled.",
        (
            ("Which sport does Omar's son Ravi do now?", "swimming"),
            ("Which sport did Ravi give up?", "judo"),
        ),
    ),
    (
        "Lena",
        "The rent for my new flat is 950 euros a month.",
        "The landlord raised my rent, it's 1,020 euros a month now.",
        (("How much is Lena's rent now?", "1,020 euros a month"),),
    ),
    (
        "Omar",
        "Our book club meets at Café Luma on Thursdays.",
        "The book club moved, we meet at the library annex now.",
        (("Where does Omar's book club meet now?", "library annex"),),
    ),
    (
        "Lena",
        "I'm going to Porto in June with my sister.",
        "Change of plan, my sister and I are going to Seville instead of Porto.",
        (("Which city are Lena and her sister travelling to in June?", "Seville"),),
    ),
)
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# Small talk: generic, and some about the planted topics without the facts.
_LONG_FILLER = (
    ("The weather has been so grey this week.", "Same here, I miss the sun."),
    ("Did you watch the match on Tuesday?", "Only the second half, sadly."),
    ("I need to buy coffee on the way home.", "Get the good one this time."),
    ("Work is busy, we have a deadline on Friday.", "Hang in there."),
    ("My neighbour's dog barked all night.", "Earplugs. Trust me."),
    ("I keep saying I'll sleep earlier and then I don't.", "Classic."),
    ("The car needs new tyres again.", "Cars are a money pit."),
    ("I fixed the squeaky door finally.", "A true hero of the household."),
    ("What are you cooking tonight?", "Pasta, as always on weeknights."),
    ("The garden needs weeding again.", "It never ends, does it?"),
    ("Traffic on the ring road was terrible this morning.", "I take the tram now, no regrets."),
    ("My phone screen cracked again.", "Get a proper case this time!"),
    ("I found a great podcast about old ships.", "Send me the link."),
    ("I still haven't started that book you recommended.", "No rush, it's not going anywhere."),
    ("There was a funny sign somewhere in town, I forgot what it said.", "Take a photo next time."),
    ("I should read more instead of scrolling.", "Same. Every evening I say that."),
    ("The kids next door are learning the trumpet.", "Brave parents."),
    ("Do you want to try the new market on Saturday?", "Maybe, if it doesn't rain."),
    ("I've been drinking far too much coffee.", "Is that even possible?"),
    ("The tram was late again today.", "It's always late when you're in a hurry."),
    ("I finally cleaned out the fridge.", "Brave. What did you find?"),
    ("My mum called to ask about the summer plans.", "Do you have summer plans?"),
    ("We should do a picnic when it gets warmer.", "Yes! By the river."),
    ("I started a new series, it's about chefs.", "No spoilers please."),
)


def _said(day: datetime, rng: random.Random) -> tuple[str, str]:
    """A relative date phrase said on `day`, and the date it means as 'D Month YYYY'."""
    phrase, offset = rng.choice(_RELATIVE)
    if offset is None:
        back = rng.randrange(2, 7)  # a weekday two to six days before
        target = day - timedelta(days=back)
        phrase = phrase.format(weekday=_WEEKDAYS[target.weekday()])
    else:
        target = day + timedelta(days=offset)
    return phrase, f"{target.day} {target:%B %Y}"


def long_set(seed: int = 11) -> tuple[tuple[Session, ...], tuple[Question, ...]]:
    """Sixteen sessions between Lena and Omar from March to August 2026 with planted facts of
    every kind, their small talk included, and the questions about them (deterministic)."""
    rng = random.Random(seed)
    n_sessions = 16
    starts = []
    at = datetime(2026, 3, 3, 19, 0, tzinfo=UTC)
    for _ in range(n_sessions):
        starts.append(at + timedelta(minutes=rng.randrange(0, 180)))
        at += timedelta(days=rng.randrange(7, 12))
    planted: list[list[list[tuple[str, str]]]] = [[] for _ in range(n_sessions)]
    qs: list[tuple[str, str, str, tuple[int, ...]]] = []  # kind, question, answer, sessions
    dates: dict[str, tuple[int, datetime]] = {}  # an event's name: (session, its date)

    def person() -> tuple[str, str]:
        a = rng.choice(LONG_PEOPLE)
        return a, LONG_PEOPLE[1 - LONG_PEOPLE.index(a)]

    def slots(k: int) -> list[int]:
        return rng.sample(range(n_sessions), k)

    for s, (title, author, about), lender in zip(slots(5), _BOOKS, _LENDERS, strict=True):
        a, b = person()
        verdict = rng.choice(
            (
                "Slow start but I'm hooked.",
                "Lovely, I read it in two evenings.",
                "Too long, but the ending is worth it.",
            )
        )
        planted[s].append(
            [
                (a, f"My {lender} lent me {title} by {author}, it's about {about}."),
                (b, "Any good?"),
                (a, verdict),
            ]
        )
        qs.append(
            (
                "single",
                f"Which book did {a}'s {lender} lend {_PRONOUN[a][1]}?",
                f"{title} by {author}",
                (s,),
            )
        )
    for s, (place, kind, text) in zip(slots(5), _SIGNS, strict=True):
        a, b = person()
        planted[s].append(
            [(a, f"The {kind} outside {place} said: {text}."), (b, "Ha! I need to see that.")]
        )
        qs.append(("single", f"What did the sign outside {place} say?", text, (s,)))
    for s, (name, rel, n) in zip(slots(3), _CHILDREN, strict=True):
        a, b = person()
        their = "his" if name == "Karl" else "her"
        planted[s].append(
            [
                (a, f"{name}, my {rel}, came over on the weekend with all {n} of {their} kids."),
                (b, "That must have been loud."),
            ]
        )
        qs.append(("single", f"How many children does {a}'s {rel} {name} have?", n, (s,)))
    for s, (event, feeling, why) in zip(slots(5), _FEELINGS, strict=True):
        a, b = person()
        phrase, when = _said(starts[s], rng)
        planted[s].append(
            [
                (a, f"{event[0].upper() + event[1:]} was {phrase}."),
                (b, "How was it?"),
                (a, f"Honestly, I felt {feeling}: {why}."),
            ]
        )
        about = event.replace("my ", f"{a}'s ")
        qs.append(("single", f"How did {a} feel at {about}?", feeling, (s,)))
        qs.append(("temporal", f"When was {about}?", when, (s,)))
        dates[about] = (s, datetime.strptime(when, "%d %B %Y"))
    for s, (plan, opinion) in zip(slots(5), _PLANS, strict=True):
        a, b = person()
        planted[s].append(
            [
                (a, f"I'm seriously thinking about {plan}."),
                (b, f"Honestly? I think it's {opinion}."),
                (a, "Hm. You might be right."),
            ]
        )
        qs.append(("single", f"What does {b} think of {a}'s idea of {plan}?", opinion, (s,)))
    for s, (said, named, how) in zip(slots(5), _HANDLED, strict=True):
        a, b = person()
        planted[s].append(
            [(a, f"Disaster week: {said}."), (b, "Oh no. What did you do?"), (a, f"I {how}.")]
        )
        qs.append(("single", f"How did {a} handle {named}?", how, (s,)))
    for s, (did, asked, named) in zip(slots(8), _EVENTS, strict=True):
        a, b = person()
        phrase, when = _said(starts[s], rng)
        planted[s].append(
            [(a, f"I {did} {phrase}!"), (b, "Nice, how did it go?"), (a, "Better than I expected.")]
        )
        qs.append(("temporal", f"When did {a} {asked.format(poss=_PRONOUN[a][2])}?", when, (s,)))
        dates[named.format(a=a)] = (s, datetime.strptime(when, "%d %B %Y"))
    for s, (thing, cost, amount) in zip(slots(4), _PRICES, strict=True):
        a, b = person()
        planted[s].append([(a, f"{thing[0].upper() + thing[1:]} {cost}."), (b, "Not bad.")])
        qs.append(("single", f"How much did {a} pay for {thing}?", amount, (s,)))
    # Contradictions: said in one session, changed in a later one.
    for who, first, later, asks in _CHANGES:
        i, j = sorted(slots(2))
        other = LONG_PEOPLE[1 - LONG_PEOPLE.index(who)]
        planted[i].append([(who, first), (other, "Oh nice.")])
        planted[j].append([(who, later), (other, "Really? Good to know.")])
        qs += [("multi", q, ans, (i, j)) for q, ans in asks]
    # A name said in one session, the thing it names in another.
    i, j = sorted(slots(2))
    planted[i].append(
        [
            ("Lena", "We adopted a cat from the shelter! Grey, very shy."),
            ("Omar", "Congratulations! What's the name?"),
            ("Lena", "Still deciding."),
        ]
    )
    planted[j].append([("Lena", "We settled on a name for the cat: Pepper."), ("Omar", "Perfect.")])
    qs.append(
        ("multi", "What did Lena name the cat she adopted from the shelter?", "Pepper", (i, j))
    )
    # Days between two dated events of different sessions.
    keyed = sorted(dates.items(), key=lambda kv: kv[1][1])
    pairs = [(x, y) for x, y in zip(keyed, keyed[3:], strict=False) if x[1][0] != y[1][0]]
    for (first, (sa, da)), (second, (sb, db)) in rng.sample(pairs, 4):
        qs.append(
            (
                "multi",
                f"How many days were there between {first} and {second}?",
                f"{(db - da).days} days",
                (sa, sb),
            )
        )
    sessions = []
    for n, groups in enumerate(planted):
        talk = [
            [(LONG_PEOPLE[k % 2], x), (LONG_PEOPLE[1 - k % 2], y)]
            for k, (x, y) in enumerate(rng.sample(_LONG_FILLER, 6))
        ]
        mixed: list[tuple[str, str]] = [*talk[0]]
        rest = groups + talk[1:]
        rng.shuffle(rest)
        for group in rest:
            mixed += group
        kind = "claude_code" if n % 5 == 2 else "openclaw"
        if kind == "claude_code":
            mixed.insert(0, ("Pip", "Hi both, I'm here if you need me."))
        sessions.append(Session(starts[n].strftime("%Y-%m-%dT%H:%M:%SZ"), kind, tuple(mixed)))
    counters: dict[str, int] = {}
    questions = []
    for kind, q, ans, ss in sorted(qs, key=lambda t: (t[0], min(t[3]))):
        counters[kind] = counters.get(kind, 0) + 1
        questions.append(
            Question(f"{kind[0]}{counters[kind]:02d}", kind, q, ans, tuple(s + 1 for s in ss))
        )
    return tuple(sessions), tuple(questions)
