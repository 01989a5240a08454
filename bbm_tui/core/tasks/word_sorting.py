"""Word sorting: read, check and write steps in the dataset's phrasing (docs/DESIGN.md §12).

The dataset's traces sort by buckets, one letter at a time:

    I should start by looking at the first letter of the words in the list. The first letter:
        "oven": "o" (15). "costume": "c" (3). "counterpart": "c" (3).
    We now have: (3) ["costume" ? "counterpart"] < (15) "oven".
    Now let's sort this subpart ["costume" ? "counterpart"] by looking at their second letters.
        The second letter: "costume": "o" (15). "counterpart": "o" (15).
    We now have: (15) ["costume" ? "counterpart"] for the subpart. Hence, we have
        ["costume" ? "counterpart"] < "oven".
    ...
    I have now sorted all the words. The answer is costume counterpart oven

The checker keeps the order the trace has built (groups of words still tied, each with how
many letters it has compared) and judges each step against the question and the steps before
it, as the paper's annotation guidelines ask: a letter or its alphabet position, a word dropped
or repeated, an order that does not follow from the letters, a subpart sorted out of turn (the
first group still tied comes first) or by the wrong letter, an answer that is not the order
reached. Where the gold labels show how the annotators read a case the guidelines leave open,
the checker reads it their way: a word copied with a spelling slip ("improvise" for
"improvisate") stands for the word meant; a wrong number before a group of a subpart's order
passes when the order is right.

Two readings are accepted for a character that is not a letter ("o's", "a&m"): the character
itself, which counts (0), before "a" (Python's order, which the targets use), or the next letter
skipping it, as a person reading "o's" might. A word too short to have the letter looked at
counts "" (0): a prefix sorts first.
"""

from __future__ import annotations

import difflib
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from bbm_tui.core.tasks import extract_answer
from bbm_tui.core.tasks.verdicts import QuestionError, unknown, wrong

T = TypeVar("T")

ORDINALS = (
    "first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
    "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
    "seventeenth", "eighteenth", "nineteenth", "twentieth", "twenty-first", "twenty-second",
    "twenty-third", "twenty-fourth", "twenty-fifth",
)

FIRST_STEP_PREFIX = "I should start by looking at the first letter of the words in the list. "
ANSWER_PREFIX = "I have now sorted all the words. The answer is "


def ordinal(number: int) -> str:
    return ORDINALS[number - 1] if 1 <= number <= len(ORDINALS) else f"{number}th"


def ordinal_number(word: str) -> int | None:
    word = word.lower()
    return ORDINALS.index(word) + 1 if word in ORDINALS else None


def alphabet_position(char: str) -> int:
    """a = 1 ... z = 26; anything else (a mark, or no letter at all) 0."""
    return ord(char) - ord("a") + 1 if len(char) == 1 and "a" <= char <= "z" else 0


def letter_at(word: str, depth: int) -> str:
    """The character a canonical trace names as the `depth`-th letter ("" past the end)."""
    return word[depth - 1] if depth <= len(word) else ""


def letter_readings(word: str, depth: int) -> set[str]:
    """Every reading of the `depth`-th letter the checker accepts (see the module's notes)."""
    letters_only = "".join(char for char in word if char.isalpha())
    return {letter_at(word, depth), letter_at(letters_only, depth)}


# -- the state a trace has reached ----------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """Words the trace holds in one place of the order: tied so far when more than one."""

    words: tuple[str, ...]
    depth: int  # letters compared so far


@dataclass(frozen=True)
class Pending:
    """Letters a step has listed, waiting for the "We now have" that orders them."""

    words: tuple[str, ...]
    depth: int
    numbers: dict[str, int]
    whole: bool  # the first letters of the whole list, not a subpart


@dataclass
class State:
    words: tuple[str, ...]
    order: list[Group] | None = None
    pending: Pending | None = None
    answered: bool = False
    # Misspelt copies the trace uses for words of the list ("improvise" for "improvisate"):
    # the annotators read them as the word meant, so the checker does too.
    aliases: dict[str, str] = field(default_factory=dict)

    def canonical(self, written: Sequence[str]) -> list[str]:
        """The list's words the written words stand for; a word not in the list stands for
        the closest word of the list missing from `written`, if one is close enough."""
        absent = [word for word in self.words if word not in written]
        result = []
        for word in written:
            if word not in self.words and word not in self.aliases:
                match = difflib.get_close_matches(word, absent, n=1, cutoff=ALIAS_CUTOFF)
                if match:
                    self.aliases[word] = match[0]
                    absent.remove(match[0])
            result.append(self.aliases.get(word, word))
        return result

    def spellings(self, word: str) -> list[str]:
        return [word] + [written for written, meant in self.aliases.items() if meant == word]

    def first_unsorted(self) -> Group | None:
        # a group of one word repeated (a list may hold a word twice) is as sorted as it gets
        return next((group for group in self.order or () if len(set(group.words)) > 1), None)


# How close a misspelt copy must be to the word it stands for (difflib's ratio).
ALIAS_CUTOFF = 0.6


def input_words(question_input: str) -> tuple[str, ...]:
    return tuple(question_input.split())


# -- parsing ----------------------------------------------------------------------------------

_ENTRY = re.compile(r'"([^"]+)"\s*:\s*"([^"]*)"\s*\(\s*(-?\d+)\s*\)')
_FIRST = re.compile(r"\bthe first letter\s*:\s*(.*)$", re.IGNORECASE)
_SUBPART = re.compile(
    r"sort this subpart\s*(?P<group>.*?)\s*by looking at (?:their|the) (?P<ord>[\w-]+) letters?"
    r"[.:]?\s*(?:the (?P<ord2>[\w-]+) letters?\s*:\s*(?P<entries>.*))?$",
    re.IGNORECASE,
)
_NOW = re.compile(r"^\s*we(?:'ve| now)? (?:now )?have\s*:?\s*(?P<rest>.*)$", re.IGNORECASE)
_HENCE = re.compile(r"\bhence,? we have\s*:?\s*", re.IGNORECASE)
_FOR_SUBPART = re.compile(r"\s*for the subpart\s*\.?\s*", re.IGNORECASE)
_TOKEN = re.compile(
    r'\(\s*(?P<num>-?\d+)\s*\)|"(?P<quoted>[^"]*)"|(?P<open>\[)|(?P<close>\])'
    r"|(?P<op>[<>?=])|(?P<bare>[A-Za-z0-9][^\s\"\[\]<>?=()]*)|(?P<other>\S)"
)


@dataclass
class Item:
    """One place in a written order: a word, or words still tied ("?" or a bracket)."""

    words: list[str] = field(default_factory=list)
    number: int | None = None


def parse_entries(text: str) -> list[tuple[str, str, int]]:
    return [(word, letter, int(number)) for word, letter, number in _ENTRY.findall(text)]


def parse_order(text: str) -> list[Item] | None:
    """A written order such as `(1) "a" < (3) ["b" ? "c"]`, or None where it is not one.
    Words side by side with nothing between them ("Hence, we have apple pear") are in order."""
    items: list[Item] = []
    current: Item | None = None
    depth = 0
    joining = False  # the last operator was "?" or "=" (the next word joins the item)
    number: int | None = None
    for match in _TOKEN.finditer(text.rstrip(". ")):
        kind = match.lastgroup
        assert kind is not None  # every alternative of _TOKEN is a named group
        value = match.group(kind)
        if kind == "num":
            number = int(value)
            if current is not None and depth == 0 and not joining:
                current = None
        elif kind in ("quoted", "bare"):
            word = value.rstrip(".,;")
            if kind == "bare" and not word:
                continue
            if current is None or (depth == 0 and not joining):
                current = Item(number=number)
                items.append(current)
            elif current.number is None:
                current.number = number
            current.words.append(word)
            number = None
            joining = False
        elif kind == "open":
            if depth == 0 and (current is None or not joining):
                current = Item(number=number)
                items.append(current)
                number = None
            depth += 1
            joining = True
        elif kind == "close":
            if depth == 0:
                return None
            depth -= 1
            joining = False
        elif kind == "op":
            if value == ">":
                return None
            if depth > 0:
                if value == "<":
                    return None
                continue
            if value == "<":
                current = None
                joining = False
            else:
                joining = True
        elif value not in ",.;:":
            return None
    if depth != 0 or not items or any(not item.words for item in items):
        return None
    return items


def format_group(words: Sequence[str]) -> str:
    if len(words) == 1:
        return f'"{words[0]}"'
    return "[" + " ? ".join(f'"{word}"' for word in words) + "]"


def format_order(groups: Sequence[Sequence[str]], numbers: Sequence[int] | None = None) -> str:
    parts = [format_group(words) for words in groups]
    if numbers is not None:
        parts = [f"({number}) {part}" for number, part in zip(numbers, parts, strict=True)]
    return " < ".join(parts)


# -- comparing orders ----------------------------------------------------------------------


def _word_count_problem(claimed: Sequence[str], expected: Sequence[str], whole: Sequence[str],
                        what: str) -> str | None:
    claimed_count, expected_count = Counter(claimed), Counter(expected)
    for word in claimed:
        if word not in expected_count:
            if word in whole:
                return f"'{word}' does not belong in {what}"
            return f"'{word}' is not in the list"
    for word in claimed:
        if claimed_count[word] > expected_count[word]:
            return f"'{word}' appears twice" if claimed_count[word] == 2 else (
                f"'{word}' appears {claimed_count[word]} times")
    for word in expected:
        if claimed_count[word] < expected_count[word]:
            return f"'{word}' is missing"
    return None


def order_problem(
    claimed: Sequence[Sequence[str]],
    expected: Sequence[Sequence[str]],
    whole: Sequence[str],
    what: str,
    numbers: dict[str, int] | None = None,
) -> str | None:
    """Why a written order (groups of tied words) is not the expected one, or None."""
    flat = [word for group in claimed for word in group]
    problem = _word_count_problem(flat, [w for g in expected for w in g], whole, what)
    if problem:
        return problem
    claimed_rank = {word: rank for rank, group in enumerate(claimed) for word in group}
    expected_rank = {word: rank for rank, group in enumerate(expected) for word in group}

    def label(word: str) -> str:
        return f"'{word}' ({numbers[word]})" if numbers and word in numbers else f"'{word}'"

    for later_index, later in enumerate(flat):
        for earlier in flat[:later_index]:
            tied_claimed = claimed_rank[earlier] == claimed_rank[later]
            sign = expected_rank[earlier] - expected_rank[later]
            if tied_claimed and sign != 0:
                return f"{label(earlier)} and {label(later)} are not tied"
            if not tied_claimed and sign > 0:
                return f"{label(later)} should come before {label(earlier)}"
            if not tied_claimed and sign == 0:
                return f"'{earlier}' and '{later}' are not ordered yet"
    return None


def groups_by_number(words: Sequence[str], numbers: dict[str, int]) -> list[tuple[str, ...]]:
    """The words ordered by their letters' positions, tied words together (stable)."""
    ranked = sorted(set(numbers[word] for word in words))
    return [tuple(word for word in words if numbers[word] == number) for number in ranked]


# -- checking one step ----------------------------------------------------------------------
# Each check applies what the step claims to the state first (the steps after it are judged
# against the trace as written, and the solver continues from it), then raises its verdict.


@dataclass(frozen=True)
class Entry:
    """`"word": "l" (n)` as written; `word` is the list's word it stands for."""

    word: str
    written: str
    letter: str
    number: int


def _entries(state: State, text: str) -> list[Entry]:
    parsed = parse_entries(text)
    meant = state.canonical([word for word, _, _ in parsed])
    return [Entry(word, written, letter, number)
            for word, (written, letter, number) in zip(meant, parsed, strict=True)]


def _items(state: State, text: str) -> list[Item] | None:
    items = parse_order(text)
    if items is None:
        return None
    meant = iter(state.canonical([word for item in items for word in item.words]))
    return [Item([next(meant) for _ in item.words], item.number) for item in items]


def _entries_problem(state: State, entries: Sequence[Entry], words: Sequence[str],
                     depth: int, what: str) -> str | None:
    problem = _word_count_problem([entry.word for entry in entries], words, state.words, what)
    if problem:
        return problem
    for entry in entries:
        word, letter, number = entry.written, entry.letter, entry.number
        readings = set().union(*(letter_readings(spelling, depth)
                                 for spelling in state.spellings(entry.word)))
        if letter not in readings:
            true = letter_at(word, depth)
            if depth == 1:
                return f"'{word}' starts with {true}, not {letter or 'nothing'}"
            if not true:
                return f"'{word}' has no {ordinal(depth)} letter"
            return f"the {ordinal(depth)} letter of '{word}' is {true}, not {letter or 'nothing'}"
        position = alphabet_position(letter)
        if number != position and (letter.isalpha() or not letter):
            if depth == 1:
                return f"'{word}' starts with {letter} ({position}), not {number}"
            shown = f"{letter} ({position})" if letter else "nothing (0)"
            return f"the {ordinal(depth)} letter of '{word}' is {shown}, not {number}"
    return None


def _claimed_numbers(entries: Sequence[Entry]) -> dict[str, int]:
    """The position each word's letter is said to have (a mark that is not a letter: 0)."""
    return {entry.word: entry.number if entry.letter.isalpha() else 0 for entry in entries}


def _check_first(state: State, text: str) -> None:
    if state.order is not None or state.pending is not None:
        raise wrong("the first letters were already listed")
    entries = _entries(state, text)
    if not entries:
        raise unknown("no letters found in this step")
    ordered = tuple(entry.word for entry in entries)
    state.pending = Pending(ordered, 1, _claimed_numbers(entries), whole=True)
    problem = _entries_problem(state, entries, state.words, 1, "the list")
    if problem:
        raise wrong(problem)


def _check_subpart(state: State, match: re.Match[str]) -> None:
    items = _items(state, match.group("group"))
    if items is None:
        raise unknown("cannot read the subpart")
    words = tuple(word for item in items for word in item.words)
    depth = ordinal_number(match.group("ord"))
    if depth is None:
        raise unknown(f"cannot read '{match.group('ord')}' as a letter's place")
    entries = _entries(state, match.group("entries") or "")
    if not entries:
        raise unknown("no letters found in this step")
    if ordinal_number(match.group("ord2") or "") != depth:
        raise wrong(f"it says {match.group('ord')} letters, then lists the "
                    f"{match.group('ord2')} letter")
    had_pending = state.pending is not None
    order = state.order
    group = next((g for g in order or () if set(g.words) == set(words)), None)
    first = state.first_unsorted()
    listed = tuple(entry.word for entry in entries)
    state.pending = Pending(listed, depth, _claimed_numbers(entries), whole=False)
    if had_pending:
        raise wrong("the letters listed in the step before were not used to order the words")
    if order is None:
        raise wrong("the words have not been ordered by their first letters yet")
    if len(set(words)) != len(words):
        raise wrong(f"'{Counter(words).most_common(1)[0][0]}' appears twice in the subpart")
    if group is None or len(group.words) < 2:
        raise wrong(f"{format_group(words)} is not a group still to sort")
    if first is not None and group != first:
        raise wrong(f"{format_group(first.words)} comes first and is not sorted yet")
    if depth != group.depth + 1:
        if depth <= group.depth:
            raise wrong(f"their {ordinal(depth)} letters were already compared")
        raise wrong(f"they were compared up to their {ordinal(group.depth)} letter; "
                    f"the {ordinal(group.depth + 1)} comes next")
    problem = _entries_problem(state, entries, group.words, depth, "this subpart")
    if problem:
        raise wrong(problem)


def _groups_of(items: Sequence[Item]) -> list[tuple[str, ...]]:
    return [tuple(item.words) for item in items]


def _numbers_problem(items: Sequence[Item], numbers: dict[str, int]) -> str | None:
    for item in items:
        for word in item.words:
            if item.number is not None and word in numbers and numbers[word] != item.number:
                return f"'{word}' has ({numbers[word]}), not ({item.number})"
    return None


def _with_depths(groups: Sequence[tuple[str, ...]], known: Sequence[Group],
                 depth: int) -> list[Group]:
    """Groups as written, each keeping the depth of the known group with the same words."""
    depths = {frozenset(group.words): group.depth for group in known}
    return [Group(words, depths.get(frozenset(words), depth)) for words in groups]


def _check_now(state: State, rest: str) -> None:
    hence = _HENCE.search(rest)
    main_text = rest[: hence.start()] if hence else rest
    main_text = _FOR_SUBPART.split(main_text)[0]
    items = _items(state, main_text)
    if items is None:
        raise unknown("cannot read the order in this step")
    hence_items = _items(state, rest[hence.end():]) if hence else None
    pending = state.pending
    if pending is None:
        raise unknown("an order with no letters listed just before it")
    written = _groups_of(items)
    new_groups = [Group(words, pending.depth) for words in written]
    old_order = state.order or []
    index = next((i for i, g in enumerate(old_order) if set(g.words) == set(pending.words)),
                 None)
    if pending.whole or index is None:
        state.order = new_groups
    else:
        state.order = old_order[:index] + new_groups + old_order[index + 1:]
    expected_order = [g.words for g in state.order]
    if hence_items is not None:
        state.order = _with_depths(_groups_of(hence_items), state.order, pending.depth)
    state.pending = None

    expected = groups_by_number(pending.words, pending.numbers)
    what = "the list" if pending.whole else "this subpart"
    problem = order_problem(written, expected, state.words, what, pending.numbers)
    # A wrong number before a group of the first order names a wrong first letter, and the
    # annotators marked it; in a subpart's order they let it pass where the order was right.
    if problem is None and pending.whole:
        problem = _numbers_problem(items, pending.numbers)
    if problem:
        raise wrong(problem)
    if hence and hence_items is None:
        raise unknown("cannot read the order after 'Hence'")
    if hence_items is not None:
        problem = order_problem(_groups_of(hence_items), expected_order, state.words,
                                "the list")
        if problem:
            raise wrong(problem)


def _check_answer(state: State, answer: str) -> None:
    state.answered = True
    if state.pending is not None:
        raise wrong("the letters listed in the step before were not used to order the words")
    if state.order is None:
        raise wrong("the words have not been sorted yet")
    unsorted = state.first_unsorted()
    if unsorted is not None:
        raise wrong(f"{format_group(unsorted.words)} is not sorted yet")
    claimed = state.canonical([word.strip(".,;") for word in answer.split()])
    problem = order_problem([(word,) for word in claimed if word],
                            [g.words for g in state.order], state.words, "the answer")
    if problem:
        raise wrong(f"in the answer, {problem}")


def check_step(state: State, step: str) -> None:
    """Judge one step, updating `state`; raise Judgement unless it is correct."""
    if state.answered:
        raise wrong("the trace goes on after its answer")
    answer = extract_answer(step)
    if answer is not None:
        _check_answer(state, answer)
        return
    first = _FIRST.search(step)
    if first:
        _check_first(state, first.group(1))
        return
    subpart = _SUBPART.search(step)
    if subpart:
        _check_subpart(state, subpart)
        return
    now = _NOW.match(step)
    if now:
        _check_now(state, now.group("rest"))
        return
    raise unknown("not a word-sorting step form the checker knows")


def start(question_input: str) -> State:
    words = input_words(question_input)
    if not words:
        raise QuestionError("there are no words to sort")
    return State(words)


# -- writing steps (the solver) ---------------------------------------------------------------


def _entry(word: str, depth: int) -> str:
    letter = letter_at(word, depth)
    return f'"{word}": "{letter}" ({alphabet_position(letter)}).'


def _first_step(state: State) -> str:
    entries = " ".join(_entry(word, 1) for word in state.words)
    return f"{FIRST_STEP_PREFIX}The first letter: {entries}"


def _subpart_step(group: Group) -> str:
    depth = group.depth + 1
    entries = " ".join(_entry(word, depth) for word in group.words)
    return (f"Now let's sort this subpart {format_group(group.words)} by looking at their "
            f"{ordinal(depth)} letters. The {ordinal(depth)} letter: {entries}")


def _ordered(pending: Pending) -> tuple[list[tuple[str, ...]], list[int]]:
    groups = groups_by_number(pending.words, pending.numbers)
    return groups, [pending.numbers[group[0]] for group in groups]


def _whole_order(state: State, pending: Pending, groups: Sequence[tuple[str, ...]]
                 ) -> list[tuple[str, ...]]:
    order = [group.words for group in state.order or ()]
    index = next((i for i, words in enumerate(order) if set(words) == set(pending.words)), None)
    if index is None:
        return list(groups)
    return order[:index] + list(groups) + order[index + 1:]


def _order_step(state: State, groups: Sequence[tuple[str, ...]], numbers: Sequence[int],
                hence: Sequence[tuple[str, ...]] | None) -> str:
    assert state.pending is not None
    if state.pending.whole:
        return f"We now have: {format_order(groups, numbers)}."
    if hence is None:
        hence = _whole_order(state, state.pending, groups)
    return (f"We now have: {format_order(groups, numbers)} for the subpart. Hence, we have "
            f"{format_order(hence)}.")


def sorted_words(state: State) -> list[str]:
    return [word for group in state.order or () for word in group.words]


def write_step(state: State) -> str:
    """The next step a careful trace writes from `state`, in the dataset's phrasing."""
    if state.pending is not None:
        groups, numbers = _ordered(state.pending)
        return _order_step(state, groups, numbers, None)
    if state.order is None:
        return _first_step(state)
    group = state.first_unsorted()
    if group is not None:
        return _subpart_step(group)
    return ANSWER_PREFIX + " ".join(sorted_words(state))


def _wrong_entries(word: str, depth: int, rng: random.Random) -> tuple[str, str] | None:
    """A wrong position for the letter, or a wrong letter, for one word."""
    letter = letter_at(word, depth)
    if not letter.isalpha():
        return None
    position = alphabet_position(letter)
    if rng.random() < 0.5:
        wrong_position = position + rng.choice([-1, 1]) if 1 < position < 26 else (
            2 if position == 1 else 25)
        return "letter_position", f'"{word}": "{letter}" ({wrong_position}).'
    readings = {letter_at(word, depth), letter_at("".join(c for c in word if c.isalpha()), depth)}
    others = sorted({c for c in word if c.isalpha()} - readings)
    if not others:
        return None
    other = rng.choice(others)
    return "wrong_letter", f'"{word}": "{other}" ({alphabet_position(other)}).'


def _letters_mistake(prefix: str, words: Sequence[str], depth: int,
                     rng: random.Random) -> tuple[str, str] | None:
    index = rng.randrange(len(words))
    wrong_entry = _wrong_entries(words[index], depth, rng)
    if wrong_entry is None:
        return None
    kind, text = wrong_entry
    entries = [text if i == index else _entry(word, depth) for i, word in enumerate(words)]
    return kind, prefix + " ".join(entries)


def _swap_adjacent(groups: Sequence[T], rng: random.Random) -> list[T] | None:
    if len(groups) < 2:
        return None
    index = rng.randrange(len(groups) - 1)
    swapped = list(groups)
    swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
    return swapped


def _drop_word(groups: Sequence[tuple[str, ...]], rng: random.Random) -> list[tuple[str, ...]]:
    index = rng.randrange(len(groups))
    group = list(groups[index])
    group.pop(rng.randrange(len(group)))
    result = list(groups)
    if group:
        result[index] = tuple(group)
    else:
        del result[index]
    return result


def mistakes(state: State, rng: random.Random) -> list[tuple[str, str]]:
    """Plausible wrong versions of the next step, each with the kind of mistake it makes
    (the kinds the dataset shows: a wrong letter or position, a dropped word, an order
    swapped)."""
    found: list[tuple[str, str]] = []
    if state.pending is not None:
        groups, numbers = _ordered(state.pending)
        swapped = _swap_adjacent(list(zip(groups, numbers, strict=True)), rng)
        if swapped:
            found.append(("swapped_order", _order_step(
                state, [g for g, _ in swapped], [n for _, n in swapped], None)))
        whole = _whole_order(state, state.pending, groups)
        if len(whole) > 1 or len(whole[0]) > 1:
            if state.pending.whole:
                dropped = _drop_word(groups, rng)
                kept = {w for g in dropped for w in g}
                found.append(("dropped_word", _order_step(
                    state, dropped, [n for g, n in zip(groups, numbers, strict=True)
                                     if set(g) & kept], None)))
            else:
                found.append(("dropped_word", _order_step(state, groups, numbers,
                                                          _drop_word(whole, rng))))
        return found
    if state.order is None:
        prefix = f"{FIRST_STEP_PREFIX}The first letter: "
        mistake = _letters_mistake(prefix, state.words, 1, rng)
        return [mistake] if mistake else []
    group = state.first_unsorted()
    if group is not None:
        depth = group.depth + 1
        prefix = _subpart_step(group)
        prefix = prefix[: prefix.index(f"The {ordinal(depth)} letter:")] + \
            f"The {ordinal(depth)} letter: "
        mistake = _letters_mistake(prefix, group.words, depth, rng)
        return [mistake] if mistake else []
    words = sorted_words(state)
    if len(words) > 1:
        swapped_words = _swap_adjacent([(w,) for w in words], rng)
        assert swapped_words is not None
        found.append(("swapped_order", ANSWER_PREFIX + " ".join(w for (w,) in swapped_words)))
        found.append(("dropped_word", ANSWER_PREFIX + " ".join(
            w for (w,) in _drop_word([(w,) for w in words], rng))))
    return found


def random_question(rng: random.Random, vocabulary: Sequence[str]) -> str:
    """A list of 3 to 20 different words drawn from `vocabulary`, as the dataset writes it."""
    return " ".join(rng.sample(sorted(set(vocabulary)), rng.randint(3, 20)))
