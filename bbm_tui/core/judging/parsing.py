"""Reading a mistake finder's answer (docs/DESIGN.md §4): strict on the paper's format, tolerant of
the ways models dress it ("Thought 3", "So the answer is 4", bold or quoted, a CoT reasoning
that ends with Yes or No). An answer that cannot be read is unparseable: kept verbatim by the
caller, counted wrong, and reported on its own."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Markdown and quoting that models wrap answers in; they never change the answer.
_DECORATION = re.compile(r"[*_`\"“”‘’«»#>]|(?<!\w)'|'(?!\w)")
_TRAILING = re.compile(r"[\s.,;:!?)\]]+$")
_LEADING = re.compile(
    r"^\s*(?:[-•]\s+|[(\[]\s*)*(?:(?:my\s+|final\s+|the\s+)*answer\s*(?:is\s*)?[:\-]?\s*)?",
    re.I,
)
_ANSWER_CLAUSE = re.compile(r"\b(?:the\s+)?(?:final\s+)?answer\s+is\s*:?\s*([^\n]*)", re.I)
# "3", "Thought 3", "Step 3", "Yes, Thought 3", "3 - the sort is wrong"; not "Thought 3 is
# ...", nor "Thought 3: ..." (a thought quoted back, not an answer).
_LEAD_NUMBER = re.compile(
    r"^(?:yes\b[\s,:;.!\-]*)?(?:(?:in|at)\s+)?(?:thought|step)?\s*(?:number\s+)?(\d+)"
    r"\s*(?:$|[-–—(,;]|\.\s)",
    re.I,
)
_LEAD_NO = re.compile(r"^(?:no|none|nope)\b", re.I)
_NO_MISTAKE = re.compile(
    r"\b(?:no|not\s+any|zero)\s+(?:mistakes?|errors?|incorrect\s+thoughts?)\b"
    r"|\ball\s+(?:the\s+)?(?:thoughts|steps)\s+(?:are|were)\s+correct\b"
    r"|\bthere\s+(?:are|is)\s+no\s+(?:mistakes?|errors?)\b",
    re.I,
)
# "The first mistake is in Thought 3", "an error in thought 3", "mistake: Thought 3";
# not "no mistake in Thought 3". Group 1 is "first" when the answer says so.
_MISTAKE_IN = re.compile(
    r"(?<!\bno )(?<!\bany )\b(first\s+)?(?:mistake|error)\s+"
    r"(?:is\s+|was\s+|occurs\s+|appears\s+|lies\s+)?(?:made\s+)?(?:(?:in|at|on)\s+|:\s*)?"
    r"(?:thought|step)\s*(\d+)\b",
    re.I,
)
# "Thought 3 is incorrect", "Thought 3 contains the first mistake".
_THOUGHT_WRONG = re.compile(
    r"\b(?:thought|step)\s*(\d+)\s+(?:is|was|contains|has|makes)\s+"
    r"(?:the\s+first\s+|a\s+|an\s+)?(?:incorrect|wrong|mistaken|erroneous|mistake|error)\b",
    re.I,
)


@dataclass(frozen=True)
class TraceAnswer:
    """A trace-level answer: `mistake_number` is the 1-based thought of the first mistake, None
    for "no mistake". When `parsed` is False the answer said nothing usable (or named a thought
    the trace does not have) and `mistake_number` means nothing."""

    mistake_number: int | None
    parsed: bool

    @property
    def verdict(self) -> str | None:
        """The answer in the paper's own format ("No" or "N"), None when unparseable."""
        if not self.parsed:
            return None
        return "No" if self.mistake_number is None else str(self.mistake_number)


UNPARSEABLE = TraceAnswer(None, False)


# A thought number past this is no thought of any trace: read as this (out of range), never
# converted whole (Python converts at most 4,300 digits; a model may write 5,000).
_PAST_ANY_THOUGHT = 10 ** 18


def _number(digits: str) -> int:
    """A number a model wrote, as an int; one of more than 18 digits is past any thought."""
    sign = -1 if digits[:1] in ("-", "−") else 1
    body = digits.lstrip("+-−")
    return sign * (int(body) if len(body) <= 18 else _PAST_ANY_THOUGHT)


def _clean(text: str) -> str:
    text = _DECORATION.sub("", text)
    text = " ".join(text.split())
    text = _LEADING.sub("", text)
    return _TRAILING.sub("", text)


def _short_trace_answer(text: str) -> TraceAnswer | None:
    """An answer in (or close to) the paper's format: "No", "3", "Thought 3", "No mistakes".
    None when the text does not start like one; UNPARSEABLE when it contradicts itself."""
    text = _clean(text)
    number = _LEAD_NUMBER.match(text)
    if number:
        return TraceAnswer(_number(number.group(1)), True)
    if _LEAD_NO.match(text) or _NO_MISTAKE.match(text):
        # "No, the mistake is in Thought 3": a "No" that names a mistake says two things.
        if _named_mistakes(text):
            return UNPARSEABLE
        return TraceAnswer(None, True)
    return None


def _named_mistakes(text: str) -> set[int]:
    named = {_number(number) for _, number in _MISTAKE_IN.findall(text)}
    return named | {_number(number) for number in _THOUGHT_WRONG.findall(text)}


def _stated_trace_answer(text: str) -> TraceAnswer | None:
    """An answer stated in prose: exactly one thought named as the (first) mistake, or a plain
    statement that there is none. Several thoughts, or both, are unparseable."""
    text = _DECORATION.sub("", text)
    first = {_number(number) for first, number in _MISTAKE_IN.findall(text) if first}
    named = first or _named_mistakes(text)
    if len(named) == 1:
        return TraceAnswer(named.pop(), True)
    if named:
        return UNPARSEABLE
    if _NO_MISTAKE.search(text):
        return TraceAnswer(None, True)
    return None


def parse_trace_answer(text: str, n_steps: int) -> TraceAnswer:
    """Parse a direct or CoT trace-level answer about a trace of `n_steps` thoughts.

    In order: the last "the answer is ..." (the CoT format), the whole answer, its first line
    and its last line in the paper's short format, then a prose statement of the mistake.
    A thought number outside 1..n_steps is unparseable."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    clauses = _ANSWER_CLAUSE.findall(text)
    candidates = [clauses[-1]] if clauses else []
    candidates += [text] if len(lines) == 1 else lines[:1] + lines[-1:]
    for candidate in candidates:
        answer = _short_trace_answer(candidate)
        if answer is not None:
            return _in_range(answer, n_steps)
    answer = _stated_trace_answer(text)
    return _in_range(answer, n_steps) if answer is not None else UNPARSEABLE


def _in_range(answer: TraceAnswer, n_steps: int) -> TraceAnswer:
    number = answer.mistake_number
    if answer.parsed and number is not None and not 1 <= number <= n_steps:
        return UNPARSEABLE
    return answer


_WORD = re.compile(r"[A-Za-z]+|\d+")
_YES = frozenset({"yes", "correct", "right", "true"})
_NO = frozenset({"no", "incorrect", "wrong", "false"})
_LEAD_WORDS = frozenset({"answer", "final", "my", "the", "verdict", "is"})
_NOTHING_WRONG = frozenset({"mistake", "mistakes", "error", "errors", "issues", "problems"})
_STATED = re.compile(
    r"\b(?:thought\s*\d+|it|this(?:\s+thought)?|the\s+thought)\s+(?:is|was)\s+"
    r"(not\s+correct|incorrect|wrong|correct|right)\b",
    re.I,
)


def _word_verdict(word: str | None, neighbour: str | None) -> bool | None:
    """Yes/No from one word, read with the word beside it: "not correct", "no mistakes"."""
    if word in _YES:
        return neighbour != "not"
    if word in _NO:
        return word == "no" and neighbour in _NOTHING_WRONG
    return None


def parse_step_answer(text: str, cot: bool = False) -> bool | None:
    """A step-level answer: True for "Yes" (the thought is correct), False for "No", None when
    unparseable. Direct answers are read from their first word, CoT answers from their last
    (the format the paper asks for), each falling back on the other end, then on a plain
    "Thought k is (in)correct"."""
    words = [w.lower() for w in _WORD.findall(text)]
    lead = words
    while lead and lead[0] in _LEAD_WORDS:
        lead = lead[1:]
    first = _word_verdict(lead[0], lead[1] if len(lead) > 1 else None) if lead else None
    last = _word_verdict(words[-1], words[-2] if len(words) > 1 else None) if words else None
    for verdict in ((last, first) if cot else (first, last)):
        if verdict is not None:
            return verdict
    stated = _STATED.findall(text)
    if stated:
        return stated[-1].lower() in ("correct", "right")
    return None




# --------------------------------------------------------------------------- the critic

_BOXED = "\\boxed"
_LATEX_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textrm)\s*\{([^{}]*)\}")
_CRITIC_NUMBER = re.compile(r"(?:thought|step)?\s*([-+−]?\d+)\.?", re.I)
_CRITIC_NONE = re.compile(
    r"(?:none|no|n/?a|null|nothing|not\s+found|all\s+correct|correct|"
    r"no\s+(?:wrong\s+)?(?:errors?|mistakes?|wrong\s+thoughts?)(?:\s+found)?)\.?",
    re.I,
)


def boxed_contents(text: str) -> list[str]:
    """What each `\\boxed{...}` in `text` holds, in order, braces inside it matched."""
    found = []
    start = text.find(_BOXED)
    while start >= 0:
        opening = start + len(_BOXED)
        while opening < len(text) and text[opening] == " ":
            opening += 1
        if opening < len(text) and text[opening] == "{":
            depth = 0
            for index in range(opening, len(text)):
                depth += {"{": 1, "}": -1}.get(text[index], 0)
                if depth == 0:
                    found.append(text[opening + 1:index])
                    break
        start = text.find(_BOXED, start + len(_BOXED))
    return found


def parse_critic_answer(text: str, n_steps: int) -> TraceAnswer:
    """The critic's answer (as ProcessBench read critic models): the last `\\boxed{}`; -1, or
    words such as "none" or "no error", say there is no mistake; a thought number from 1 to
    `n_steps` is the first mistake. No box, anything else in it, or a number outside the trace
    (0, -2, n_steps + 1) is unparseable."""
    boxes = boxed_contents(text)
    if not boxes:
        return UNPARSEABLE
    content = boxes[-1]
    while True:
        unwrapped = _LATEX_WRAPPER.sub(r"\1", content)
        if unwrapped == content:
            break
        content = unwrapped
    content = " ".join(content.replace("$", "").split())
    number = _CRITIC_NUMBER.fullmatch(content)
    if number is not None:
        value = _number(number.group(1))
        if value == -1:
            return TraceAnswer(None, True)
        return TraceAnswer(value, True) if 1 <= value <= n_steps else UNPARSEABLE
    if _CRITIC_NONE.fullmatch(content):
        return TraceAnswer(None, True)
    return UNPARSEABLE
