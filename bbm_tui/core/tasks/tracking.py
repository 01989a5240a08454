"""Tracking shuffled objects: read, check and write steps in the dataset's phrasing (docs/DESIGN.md
§12).

    At the start: Alice: yellow, Bob: blue, Claire: pink.
    Claire and Alice swap balls: Alice: pink, Bob: blue, Claire: yellow.
    ...
    At the end of the game, Bob has the yellow ball. So the answer is (A)

The checker follows who holds what, as the steps claim it, and judges each step against the
question and the steps before it (the paper's annotation guidelines): the swap a step makes
must be the next one in the question, whoever it lists must hold what that swap leaves them,
and the answer must name what the asked person holds and that object's option. Shorthand is
fine ("A: yellow" for Alice's yellow ball, "Gatsby" for The Great Gatsby), as are steps that
list only some people, or that name a swap and leave the holdings to the next step.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from bbm_tui.core.tasks import extract_answer
from bbm_tui.core.tasks.verdicts import QuestionError, unknown, wrong

# -- the question -------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    people: tuple[str, ...]
    items: tuple[str, ...]  # items[i] is what people[i] holds at the start
    swaps: tuple[tuple[str, str], ...]
    swap_phrases: tuple[str, ...]  # "Claire and Alice swap balls", as the question says it
    asked: str  # whose object the question asks for
    ending: str  # "At the end of the game, Bob has the"
    options: dict[str, str]  # "(A)" -> "yellow ball"

    def option_of(self, item: str) -> str | None:
        return next((letter for letter, text in self.options.items() if text == item), None)


_HOLDING = re.compile(
    r"^(?P<name>[A-Z][a-z]+) (?:has an?|has|gets|is dancing with|is playing|is holding an?)"
    r"\s+(?P<item>.+)$"
)
_SWAP = re.compile(r"(?:First|Then|Finally),\s+(?P<phrase>(?P<a>[A-Z][a-z]+) and "
                   r"(?P<b>[A-Z][a-z]+) (?:swap|switch|trade)[^.]*)\.")
_ENDING = re.compile(r"(?P<ending>At the end of [^,]*, (?P<name>[A-Z][a-z]+) [^\n]*?)\s*$")
_OPTION = re.compile(r"^(?P<letter>\([A-Z]\))\s*(?P<text>.+?)\.?\s*$")


def parse_question(question_input: str) -> Question:
    lines = [line.strip() for line in question_input.strip().split("\n")]
    if len(lines) < 3 or ":" not in lines[0]:
        raise QuestionError("not a tracking question: no starting holdings")
    people, items = [], []
    holdings = lines[0].split(":", 1)[1].strip().rstrip(".")
    for clause in re.split(r",\s+(?:and\s+)?", holdings):
        match = _HOLDING.match(clause.strip())
        if not match:
            raise QuestionError(f"cannot read the starting holding {clause!r}")
        people.append(match.group("name"))
        items.append(match.group("item").strip())
    swaps = [(m.group("a"), m.group("b")) for m in _SWAP.finditer(lines[1])]
    phrases = [m.group("phrase") for m in _SWAP.finditer(lines[1])]
    ending = _ENDING.search(lines[1])
    options = {}
    for line in lines[2:]:
        match = _OPTION.match(line)
        if match:
            options[match.group("letter")] = match.group("text").strip()
    if not swaps or ending is None or not options:
        raise QuestionError("not a tracking question: no swaps, ending or options")
    if any(name not in people for swap in swaps for name in swap):
        raise QuestionError("a swap names someone who holds nothing")
    return Question(tuple(people), tuple(items), tuple(swaps), tuple(phrases),
                    ending.group("name"), ending.group("ending"), options)


# -- naming people and objects in steps ----------------------------------------------------

_SUFFIXES = (" ball", " present", " gift", " book")


def _norm(text: str) -> str:
    text = re.sub(r"[^a-z0-9' -]", " ", text.lower())
    text = re.sub(r"\s+", " ", text).strip()
    for prefix in ("the ", "a ", "an "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    for suffix in _SUFFIXES:
        if text.endswith(suffix):
            text = text[: -len(suffix)]
    return text


def resolve_item(question: Question, mention: str) -> str | None:
    """The object a step means by `mention` ("yellow", "Gatsby", "The Odyssey"), or None."""
    said = _norm(mention)
    if not said:
        return None
    exact = [item for item in question.items if _norm(item) == said]
    if len(exact) == 1:
        return exact[0]
    partial = [item for item in question.items
               if re.search(rf"\b{re.escape(said)}\b", _norm(item))
               or re.search(rf"\b{re.escape(_norm(item))}\b", said)]
    return partial[0] if len(partial) == 1 else None


def resolve_person(question: Question, mention: str) -> str | None:
    for person in question.people:
        if mention.lower() in (person.lower(), person[0].lower()):
            return person
    return None


def short_item(item: str) -> str:
    """How a step names an object: the colour of a ball or present, else the object."""
    for suffix in _SUFFIXES:
        if item.endswith(suffix):
            return item[: -len(suffix)]
    return item


# -- reading a step -------------------------------------------------------------------------

@dataclass(frozen=True)
class Patterns:
    """The step patterns for one question's people (a name, or its initial)."""

    listed: re.Pattern[str]
    has: re.Pattern[str]
    header: re.Pattern[str]
    end: re.Pattern[str]


@functools.cache
def patterns(people: tuple[str, ...]) -> Patterns:
    names = sorted({*people, *(person[0] for person in people)}, key=len, reverse=True)
    name = "(?:" + "|".join(re.escape(n) for n in names) + ")"
    return Patterns(
        listed=re.compile(rf"\b(?P<name>{name})\s*:\s*(?P<item>[^,:;]+?)\s*"
                          r"(?=,|;|\.\s|\.?$|\s+So\b)"),
        has=re.compile(rf"\b(?P<name>{name}) (?:now )?(?:has|holds|gets|is dancing with|"
                       r"is playing|is holding)(?: the| a| an)?\s+(?P<item>[^,.;]+?)\s*"
                       r"(?=,|;|\.|$|\s+So\b)"),
        header=re.compile(rf"^\s*(?P<a>{name}) and (?P<b>{name}) (?:swap|switch|trade)\w*"
                          r"(?: [a-z]+)?(?: [a-z]+)?\s*(?:[:,.]|$)"),
        end=re.compile(rf"\bAt the end of [^,]*, (?P<name>{name}) ", re.IGNORECASE),
    )


# A terse form some traces use: "C D: C Black, D White" (Claire and Dave swap).
_TERSE_HEADER = re.compile(r"^\s*(?P<a>[A-Z]) (?P<b>[A-Z])\s*:")
_TERSE_HELD = re.compile(
    r"\b(?P<name>[A-Z]) (?P<item>[A-Za-z][\w-]*(?: [a-z][\w-]*)?)\s*(?=,|\.|$)"
)
_SPACES = re.compile(r"\s{2,}|[^\S ]")
_START = re.compile(r"^\s*(?:at the start|initially|in the beginning)\b", re.IGNORECASE)


@dataclass
class Read:
    """What a step says: a swap it names, who it says holds what, and its answer."""

    swap: tuple[str, str] | None = None
    start: bool = False
    holdings: dict[str, str] = field(default_factory=dict)
    end_person: str | None = None
    end_item: str | None = None
    answer: str | None = None


def read_step(question: Question, step: str) -> Read:
    # Runs of white space as one space: the patterns below end an item at white space
    # followed by "So", and over a long run they backtracked in cubic time (a 5 KB run after
    # "Alice: x" took 198 s); with single spaces each is linear in the step.
    step = _SPACES.sub(" ", step)
    read = Read(answer=extract_answer(step))
    body = step[: step.find("answer is")] if read.answer is not None else step
    found = patterns(question.people)
    header = found.header.match(body) or _TERSE_HEADER.match(body)
    if header and header.re is _TERSE_HEADER:
        for match in _TERSE_HELD.finditer(body[header.end():]):
            person = resolve_person(question, match.group("name"))
            item = resolve_item(question, match.group("item"))
            if person is None or item is None:
                raise unknown(f"cannot tell which object '{match.group('item')}' is")
            read.holdings[person] = item
    if header:
        first = resolve_person(question, header.group("a"))
        second = resolve_person(question, header.group("b"))
        if first is None or second is None:
            raise unknown("a swap between people the question does not name")
        read.swap = (first, second)
        body = body[header.end():]
    read.start = bool(_START.match(body))
    end = found.end.search(body)
    if end:
        read.end_person = resolve_person(question, end.group("name"))
        mention = body[end.end():]
        mention = re.split(r"\.\s|\.$|\s+So\b", mention)[0]
        mention = re.sub(r"^(?:has|is dancing with|is playing|is holding|holds)\s+", "", mention)
        read.end_item = resolve_item(question, mention)
        if read.end_item is None:
            raise unknown(f"cannot tell which object '{mention.strip()}' is")
        body = body[: end.start()]
    for pattern in (found.listed, found.has):
        for match in pattern.finditer(body):
            person = resolve_person(question, match.group("name"))
            item = resolve_item(question, match.group("item"))
            if person is None or item is None:
                raise unknown(f"cannot tell which object '{match.group('item').strip()}' is")
            if person in read.holdings and read.holdings[person] != item:
                raise wrong(f"it gives {person} two objects")
            read.holdings[person] = item
    return read


# -- checking ---------------------------------------------------------------------------------


@dataclass
class State:
    question: Question
    holdings: dict[str, str]
    swaps_done: int = 0
    listed: bool = False  # a step has listed holdings since the last swap was named
    answered: bool = False

    def next_swap(self) -> tuple[str, str] | None:
        swaps = self.question.swaps
        return swaps[self.swaps_done] if self.swaps_done < len(swaps) else None


def start_state(question: Question) -> State:
    return State(question, dict(zip(question.people, question.items, strict=True)))


def _same_pair(a: tuple[str, str], b: tuple[str, str]) -> bool:
    return set(a) == set(b)


def _after(holdings: dict[str, str], swap: tuple[str, str]) -> dict[str, str]:
    result = dict(holdings)
    result[swap[0]], result[swap[1]] = holdings[swap[1]], holdings[swap[0]]
    return result


def _item_name(item: str) -> str:
    return item if item[:1].isupper() else f"the {item}"


def _holdings_problem(claimed: dict[str, str], expected: dict[str, str], when: str) -> str | None:
    for person, item in claimed.items():
        if expected[person] != item:
            return f"{when}, {person} has {_item_name(expected[person])}, not {_item_name(item)}"
    return None


def _swapped_left_out(claimed: dict[str, str], swap: tuple[str, str]) -> str | None:
    """A step that lists holdings after a swap must say what both people in it now hold."""
    missing = [person for person in swap if person not in claimed]
    if not missing:
        return None
    verb = "has" if len(missing) == 1 else "have"
    return f"it leaves out what {' and '.join(missing)} now {verb}"


def _swap_phrase(swap: tuple[str, str]) -> str:
    return f"{swap[0]} and {swap[1]}"


def _do_swap(state: State, named: tuple[str, str]) -> tuple[tuple[str, str] | None, str | None]:
    """Apply the next swap; say what is wrong if `named` is not it."""
    expected = state.next_swap()
    if expected is None:
        return None, f"there is no swap left, yet {_swap_phrase(named)} swap"
    state.holdings = _after(state.holdings, expected)
    state.swaps_done += 1
    state.listed = False
    if _same_pair(named, expected):
        return expected, None
    later = state.question.swaps[state.swaps_done:]
    if any(_same_pair(named, swap) for swap in later):
        return expected, f"it skips the swap of {_swap_phrase(expected)}"
    return expected, f"the next swap is {_swap_phrase(expected)}, not {_swap_phrase(named)}"


def _list_after_swap(state: State, read: Read, swap: tuple[str, str] | None) -> str | None:
    """Take the holdings a step lists after `swap` (what the steps after it build on) and
    say what is wrong with them."""
    expected = dict(state.holdings)
    state.holdings.update(read.holdings)
    state.listed = True
    if swap is None:
        return None
    return (_holdings_problem(read.holdings, expected, f"after {_swap_phrase(swap)} swap")
            or _swapped_left_out(read.holdings, swap))


def _check_holdings(state: State, read: Read) -> None:
    """A list of holdings with no swap named: the start, the state after a swap the step
    before named, or the next swap made silently."""
    question = state.question
    if read.start or (state.swaps_done == 0 and not state.listed
                      and not _holdings_problem(read.holdings, state.holdings, "")):
        problem = _holdings_problem(read.holdings, state.holdings, "at the start")
        if state.swaps_done > 0:
            problem = "it goes back to the start"
        _list_after_swap(state, read, None)
        if problem:
            raise wrong(problem)
        return
    if not state.listed and state.swaps_done > 0:
        # the step before named the swap; this step lists what it left
        problem = _list_after_swap(state, read, question.swaps[state.swaps_done - 1])
    else:
        expected = state.next_swap()
        if expected is None or not _holdings_problem(read.holdings, state.holdings, ""):
            state.holdings.update(read.holdings)
            raise wrong("it repeats who holds what without a swap")
        _do_swap(state, expected)
        problem = _list_after_swap(state, read, expected)
    if problem:
        raise wrong(problem)


def _check_answer(state: State, read: Read) -> None:
    question = state.question
    state.answered = True
    remaining = state.next_swap()
    if remaining is not None:
        raise wrong(f"the swap of {_swap_phrase(remaining)} is not done yet")
    person = read.end_person or question.asked
    if person != question.asked:
        raise wrong(f"the question asks about {question.asked}, not {person}")
    held = state.holdings[person]
    if read.end_item is not None and read.end_item != held:
        raise wrong(f"{person} has {_item_name(held)}, not {_item_name(read.end_item)}")
    letter = (read.answer or "").strip().rstrip(".")
    said = read.end_item or held
    expected_letter = question.option_of(said)
    if letter != expected_letter:
        if letter not in question.options:
            raise wrong(f"{letter or 'nothing'} is not one of the options")
        raise wrong(f"{_item_name(said)} is option {expected_letter}, not {letter}")


def check_step(state: State, step: str) -> None:
    if state.answered:
        raise wrong("the trace goes on after its answer")
    read = read_step(state.question, step)
    if read.swap is not None:
        expected, problem = _do_swap(state, read.swap)
        if read.holdings:
            problem = problem or _list_after_swap(state, read, expected)
        if problem:
            raise wrong(problem)
    elif read.holdings:
        _check_holdings(state, read)
    if read.answer is not None:
        _check_answer(state, read)
    elif read.swap is None and not read.holdings:
        raise unknown("not a tracking step form the checker knows")


def start(question_input: str) -> State:
    return start_state(parse_question(question_input))


# -- writing steps (the solver) ---------------------------------------------------------------


def _listing(question: Question, holdings: dict[str, str]) -> str:
    return ", ".join(f"{person}: {short_item(holdings[person])}" for person in question.people)


def _final(question: Question, item: str, letter: str) -> str:
    return f"{question.ending} {item}. So the answer is {letter}"


def write_step(state: State) -> str:
    """The next step a careful trace writes from `state`, in the dataset's phrasing."""
    question = state.question
    if state.swaps_done == 0 and not state.listed:
        return f"At the start: {_listing(question, state.holdings)}."
    if not state.listed:
        return f"{_listing(question, state.holdings)}."  # the swap the step before named
    swap = state.next_swap()
    if swap is not None:
        after = _after(state.holdings, swap)
        return f"{question.swap_phrases[state.swaps_done]}: {_listing(question, after)}."
    item = state.holdings[question.asked]
    letter = question.option_of(item)
    if letter is None:
        raise QuestionError(f"no option is {_item_name(item)}")
    return _final(question, item, letter)


def _exchange_two(question: Question, holdings: dict[str, str], rng: random.Random,
                  among: Sequence[str] | None = None) -> dict[str, str]:
    """The holdings with two people's objects exchanged (a swapped holder)."""
    people = list(among or question.people)
    first, second = rng.sample(people, 2)
    wrong_holdings = dict(holdings)
    wrong_holdings[first], wrong_holdings[second] = holdings[second], holdings[first]
    return wrong_holdings


def mistakes(state: State, rng: random.Random) -> list[tuple[str, str]]:
    """Plausible wrong versions of the next step, each with the kind of mistake it makes."""
    question = state.question
    if state.swaps_done == 0 and not state.listed:
        wrong_start = _exchange_two(question, state.holdings, rng)
        return [("swapped_holder", f"At the start: {_listing(question, wrong_start)}.")]
    if not state.listed:
        return [("swapped_holder",
                 f"{_listing(question, _exchange_two(question, state.holdings, rng))}.")]
    swap = state.next_swap()
    if swap is not None:
        after = _after(state.holdings, swap)
        # the swap's two people keep what they had, and one of them trades with a third
        others = [p for p in question.people if p not in swap]
        among = [rng.choice(swap), rng.choice(others)] if others else list(swap)
        found = [("swapped_holder", f"{question.swap_phrases[state.swaps_done]}: "
                  f"{_listing(question, _exchange_two(question, after, rng, among))}.")]
        later = state.swaps_done + 1
        if later < len(question.swaps) and not _same_pair(question.swaps[later], swap):
            skipped = _after(state.holdings, question.swaps[later])
            found.append(("skipped_swap", f"{question.swap_phrases[later]}: "
                          f"{_listing(question, skipped)}."))
        return found
    held = state.holdings[question.asked]
    others = [item for item in question.items if item != held and question.option_of(item)]
    found = []
    if others and question.option_of(held):
        other = rng.choice(others)
        found.append(("swapped_holder", _final(question, other, question.option_of(other) or "")))
        letters = [letter for letter, _ in question.options.items()
                   if letter != question.option_of(held)]
        found.append(("wrong_option", _final(question, held, rng.choice(letters))))
    return found


PEOPLE = ("Alice", "Bob", "Claire", "Dave", "Eve", "Fred", "Gertrude")
COLOURS = ("yellow", "blue", "pink", "white", "purple", "red", "green", "orange", "black",
           "brown")


def random_question(rng: random.Random) -> str:
    """A question in BIG-bench's ball-game form: 3, 5 or 7 players and as many swaps."""
    count = rng.choice((3, 5, 7))
    people = list(PEOPLE[:count])
    colours = rng.sample(COLOURS, count)
    names = ", ".join(people[:-1]) + f", and {people[-1]}"
    holdings = ", ".join(f"{p} has a {c} ball" for p, c in zip(people[:-1], colours,
                                                                strict=False))
    holdings += f", and {people[-1]} has a {colours[-1]} ball"
    turns = []
    for index in range(count):
        first, second = rng.sample(people, 2)
        turn = "First" if index == 0 else "Finally" if index == count - 1 else "Then"
        turns.append(f"{turn}, {first} and {second} swap balls.")
    asked = rng.choice(people)
    options = "\n".join(f"({chr(65 + i)}) {c} ball." for i, c in enumerate(colours))
    return (f"{names} are playing a game. At the start of the game, they are each holding a "
            f"ball: {holdings}.\nAs the game progresses, pairs of players trade balls. "
            f"{' '.join(turns)} At the end of the game, {asked} has the\nOptions:\n{options}")
