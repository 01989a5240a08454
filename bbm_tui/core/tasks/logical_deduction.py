"""Logical deduction: check what a program can check, say "cannot judge" for the rest
(docs/DESIGN.md §12). The solver does not write this task.

The question's statements are read into constraints on positions (1 is the leftmost, the
first to finish, the newest, the most expensive), and every order that meets them is found.
A step can then be checked where it says something a program can read:

- a statement it quotes must be one of the question's (or follow from them);
- the positions it claims ("So from left to right: first is the white book, then second can
  be the green book or the orange book, ...") must follow from the statements the trace has
  used so far: the guidelines count a true claim that does not follow yet as a jump;
- its answer must be the option that holds in the order the statements fix.

Everything else (the plan, "by process of elimination", reasoning in free words) gets "cannot
judge" rather than a guess.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache

from bbm_tui.core.tasks import extract_answer
from bbm_tui.core.tasks.verdicts import QuestionError, unknown, wrong

ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh",
                 "eighth", "ninth", "tenth")


MAX_OBJECTS = 7


@dataclass(frozen=True)
class Constraint:
    """pos(a) == position, or pos(a) < pos(b) (1 is the leftmost / first / newest / dearest)."""

    a: str
    position: int | None = None
    before: str | None = None

    def holds(self, order: Sequence[str]) -> bool:
        if self.position is not None:
            return order.index(self.a) + 1 == self.position
        assert self.before is not None
        return order.index(self.a) < order.index(self.before)


@dataclass(frozen=True)
class Question:
    objects: tuple[str, ...]
    noun: str  # "book", "vehicle", "fruit", "golfer", "bird"
    statements: tuple[tuple[str, Constraint], ...]  # (the sentence, its constraint)
    options: tuple[tuple[str, Constraint], ...]  # ("(A)", what it says)

    @property
    def size(self) -> int:
        return len(self.objects)


_INTRO = re.compile(r"(?:there (?:are|were)|sells) (?P<count>\w+) (?P<noun>\w+?)s?:\s*"
                    r"(?P<objects>.*?)\.?$", re.IGNORECASE)


def _strip_article(text: str) -> str:
    return re.sub(r"^(?:the|a|an)\s+", "", text.strip(), flags=re.IGNORECASE).strip()


def _norm(text: str) -> str:
    text = re.sub(r"[^a-z0-9 -]", " ", text.lower())
    text = re.sub(r"\b(?:the|a|an)\b", " ", text)
    return re.sub(r"\s+", " ", text).strip()


def _position_of(phrase: str, size: int) -> int | None:
    """'second from the left' -> 2, 'third-oldest' -> size - 2, 'cheapest' -> size, ..."""
    phrase = _norm(phrase).replace("-", " ")
    simple = {"leftmost": 1, "rightmost": size, "newest": 1, "oldest": size, "first": 1,
              "last": size, "most expensive": 1, "cheapest": size, "least expensive": size}
    if phrase in simple:
        return simple[phrase]
    match = re.fullmatch(r"(?P<ord>\w+)(?: from (?P<side>left|right))?"
                         r"(?: (?P<end>to last|newest|oldest|most expensive|cheapest|"
                         r"least expensive))?", phrase)
    if not match or match.group("ord") not in ORDINAL_WORDS:
        return None
    number = ORDINAL_WORDS.index(match.group("ord")) + 1
    from_end = match.group("side") == "right" or match.group("end") in (
        "to last", "oldest", "cheapest", "least expensive")
    return size + 1 - number if from_end else number


_RELATION = re.compile(
    r"^(?P<a>.+?) (?:is|are|finished) (?:to the )?(?P<rel>left of|right of|newer than|"
    r"older than|more expensive than|less expensive than|above|below) (?P<b>.+?)\.?$",
    re.IGNORECASE,
)
_ABSOLUTE = re.compile(r"^(?P<a>.+?) (?:is|are|finished|must be|must have finished|has to be) "
                       r"(?:the )?(?P<pos>.+?)\.?$", re.IGNORECASE)
_EARLIER = ("left of", "newer than", "more expensive than", "above")


def resolve(objects: Sequence[str], mention: str) -> str | None:
    said = _norm(mention)
    exact = [obj for obj in objects if _norm(obj) == said]
    if len(exact) == 1:
        return exact[0]
    inside = [obj for obj in objects if re.search(rf"\b{re.escape(_norm(obj))}\b", said)]
    return inside[0] if len(inside) == 1 else None


def parse_constraint(sentence: str, objects: Sequence[str]) -> Constraint | None:
    sentence = sentence.strip().lstrip("-").strip()
    relation = _RELATION.match(sentence)
    if relation:
        a, b = resolve(objects, relation.group("a")), resolve(objects, relation.group("b"))
        if a is None or b is None:
            return None
        if relation.group("rel").lower() in _EARLIER:
            return Constraint(a, before=b)
        return Constraint(b, before=a)
    absolute = _ABSOLUTE.match(sentence)
    if absolute:
        a = resolve(objects, absolute.group("a"))
        position = _position_of(absolute.group("pos"), len(objects))
        if a is not None and position is not None:
            return Constraint(a, position=position)
    return None


@cache
def parse_question(question_input: str) -> Question:
    lines = [line.strip() for line in question_input.strip().split("\n")]
    objects: list[str] = []
    noun = "object"
    statements: list[tuple[str, Constraint]] = []
    options: dict[str, Constraint] = {}
    for line in lines:
        intro = _INTRO.search(line)
        if intro and not objects:
            noun = intro.group("noun").lower()
            parts = re.split(r",\s*(?:and\s+)?|\s+and\s+", intro.group("objects"))
            objects = [_strip_article(part) for part in parts if part.strip()]
            continue
        if line.startswith("-") and objects:
            constraint = parse_constraint(line, objects)
            if constraint is None:
                raise QuestionError(f"cannot read the statement {line!r}")
            statements.append((line.lstrip("- ").rstrip("."), constraint))
        option = re.match(r"^(?P<letter>\([A-Z]\))\s*(?P<text>.+)$", line)
        if option and objects:
            constraint = parse_constraint(option.group("text"), objects)
            if constraint is not None:
                options[option.group("letter")] = constraint
    if not objects or not statements:
        raise QuestionError("not a logical deduction question")
    if len(objects) > MAX_OBJECTS:  # every order is tried: 7 objects make 5,040
        raise QuestionError(f"more than {MAX_OBJECTS} objects")
    return Question(tuple(objects), noun, tuple(statements), tuple(options.items()))


@cache
def orders(question: Question, used: frozenset[int]) -> tuple[tuple[str, ...], ...]:
    """Every order that meets the statements numbered in `used`."""
    constraints = [question.statements[index][1] for index in sorted(used)]
    return tuple(order for order in itertools.permutations(question.objects)
                 if all(constraint.holds(order) for constraint in constraints))


def solution(question: Question) -> tuple[tuple[str, ...], ...]:
    return orders(question, frozenset(range(len(question.statements))))


def correct_option(question: Question) -> str | None:
    solved = solution(question)
    right = [letter for letter, constraint in question.options
             if solved and all(constraint.holds(order) for order in solved)]
    return right[0] if len(right) == 1 else None


# -- reading a step's claims ----------------------------------------------------------------

# "from A to B:" just before a colon, then the claims after it up to the sentence's end. The
# two are matched apart, from each colon, over at most _DIRECTION_WINDOW characters before it:
# one pattern for all of it backtracked over every "from" and " to " of the step (a 4 KB step
# of "from a to " took 6 s, a 100 KB one for ever).
_DIRECTION_HEAD = re.compile(r"\bfrom (?P<start>[\w ]+?) to (?P<end>[\w ]+?)\s*$", re.IGNORECASE)
_DIRECTION_CLAIMS = re.compile(r"\s*(?P<claims>.*?)(?=(?:\.\s+[A-Z])|\.?$)")
_DIRECTION_WINDOW = 200
_REVERSED_STARTS = ("right", "last", "oldest", "cheapest", "least")


@dataclass
class Claim:
    position: int  # on the question's axis
    allowed: frozenset[str]
    said: str  # the place as the step names it: "fifth from oldest to newest"


# What a step says of a place that puts no object there: "an unknown fruit", "any book".
_NO_OBJECT = re.compile(r"\b(?:any|unknown|another|other|remaining|some)\b|^(?:last|first|"
                        r"newest|oldest|leftmost|rightmost|cheapest|most expensive)\b")


def _direction(text: str) -> tuple[str, str, str] | None:
    """The first "from A to B: claims" of a step: A and B (lower case) and the claims; in time
    linear in the step."""
    colon = text.find(":")
    while colon >= 0:
        head = _DIRECTION_HEAD.search(text, max(0, colon - _DIRECTION_WINDOW), colon)
        if head is not None:
            claims = _DIRECTION_CLAIMS.match(text, colon + 1)
            if claims is not None:
                return (head.group("start").lower().strip(), head.group("end").lower().strip(),
                        claims.group("claims"))
        colon = text.find(":", colon + 1)
    return None


def _claims(question: Question, text: str) -> list[Claim] | None:
    """The places a "So from A to B: first is ..., then ..." sentence claims (None: there is
    one, but it cannot be read)."""
    found = _direction(text)
    if found is None:
        return []
    start, end, said = found
    direction = f"from {start} to {end}"
    reverse = any(start.startswith(word) for word in _REVERSED_STARTS)
    claims: list[Claim] = []
    for segment in re.split(r"[;,]?\s*\bthen\b|;", said):
        segment = segment.strip(" ,.")
        if not segment:
            continue
        found = re.match(r"^(?P<ords>[\w ,]+?)\s+(?:is|are|can be|must be|could be)\s+"
                         r"(?P<what>.+)$", segment)
        if not found:
            return None
        ordinals = re.findall(r"\b(" + "|".join(ORDINAL_WORDS) + r")\b", found.group("ords"))
        if not ordinals:
            return None
        what = _norm(found.group("what"))
        allowed = {resolve(question.objects, part)
                   for part in re.split(r",\s*(?:or\s+)?|\s+or\s+", found.group("what"))}
        if None in allowed or not allowed:
            if _NO_OBJECT.search(what):
                continue
            return None
        for word in ordinals:
            number = ORDINAL_WORDS.index(word) + 1
            position = question.size + 1 - number if reverse else number
            claims.append(Claim(position, frozenset(obj for obj in allowed if obj),
                                f"{word} {direction}"))
    return claims


def name(obj: str) -> str:
    return obj if obj[:1].isupper() else f"the {obj}"


def _cited(question: Question, text: str) -> set[int]:
    said = _norm(text)
    return {index for index, (sentence, _) in enumerate(question.statements)
            if _norm(sentence) in said}


@dataclass
class State:
    question: Question
    used: set[int] = field(default_factory=set)
    answered: bool = False


def _check_claims(state: State, claims: Sequence[Claim]) -> None:
    question = state.question
    possible = orders(question, frozenset(state.used))
    solved = solution(question)
    for claim in claims:
        if claim.position < 1 or claim.position > question.size:
            raise wrong(f"there are only {question.size} {question.noun}s")
        names = " or ".join(name(obj) for obj in sorted(claim.allowed))
        if any(order[claim.position - 1] not in claim.allowed for order in solved):
            raise wrong(f"{names} cannot be {claim.said}")
        if any(order[claim.position - 1] not in claim.allowed for order in possible):
            raise wrong(f"nothing said so far puts {names} {claim.said}")


def _check_answer(state: State, answer: str) -> None:
    state.answered = True
    letters = re.findall(r"\([A-Z]\)", answer)
    if len(letters) != 1:
        raise wrong("the answer must be one option")
    right = correct_option(state.question)
    if right is None:
        raise unknown("the checker cannot tell which option is right")
    if letters[0] != right:
        raise wrong(f"{letters[0]} does not hold; {right} does")


_LEAD_IN = re.compile(r"^(?:so|thus|hence|therefore|according to [^,]*|by process of "
                      r"elimination|we (?:previously )?concluded that|this means that)\s*,?\s*",
                      re.IGNORECASE)


def _sentences(step: str) -> list[str]:
    """The step's clauses that could be statements, lead-ins ("So", "According to this
    ordering,") taken off."""
    clauses = re.split(r"(?<=\.)\s+|,\s*so\s+|;\s*", step)
    result = []
    for clause in clauses:
        clause = clause.strip().rstrip(".")
        while (lead_in := _LEAD_IN.match(clause)) and lead_in.end() > 0:
            clause = clause[lead_in.end():]
        if clause and "answer" not in clause.lower():
            result.append(clause)
    return result


def check_step(state: State, step: str) -> None:
    if state.answered:
        raise wrong("the trace goes on after its answer")
    question = state.question
    answer = extract_answer(step)
    cited = _cited(question, step)
    state.used |= cited
    claims = _claims(question, step)
    checked = bool(cited)
    possible = orders(question, frozenset(state.used))
    for sentence in _sentences(step):
        constraint = parse_constraint(sentence, question.objects)
        if constraint is None:
            continue
        checked = True
        said = re.sub(r"^The\b", "the", sentence)
        if not all(constraint.holds(order) for order in solution(question)):
            raise wrong(f"it is not so that {said}")
        if not all(constraint.holds(order) for order in possible):
            raise wrong(f"nothing said so far shows that {said}")
    if claims is None:
        if answer is None:
            raise unknown("cannot read the order this step claims")
    elif claims:
        _check_claims(state, claims)
        checked = True
    if answer is not None:
        _check_answer(state, answer)
    elif not checked:
        raise unknown("nothing in this step a program can check")


def start(question_input: str) -> State:
    return State(parse_question(question_input))
