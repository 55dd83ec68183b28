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

from dataclasses import dataclass


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
