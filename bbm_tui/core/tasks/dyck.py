"""Dyck languages: read, check and write steps in the dataset's phrasing (docs/DESIGN.md §12).

    We should process each input one by one and keep track of the stack configuration.
    stack: empty
    [ ; stack: [
    { ; stack: [ {
    ...
    Now, we have reached the end. The final stack is "[ {".
    We will need to pop out "{", "[" one by one in that order.
    So, we need "}", "]". So the answer is } ]

The paper labelled most Dyck traces by comparing each step with the trace a program writes
(its annotate_dyck_languages.py); this checker judges the same things: each symbol step must
take the next symbol of the input and leave the stack that symbol makes (a closing bracket pops
its partner; anything else is pushed), the end comes when the input does, the stack is popped
in reverse and the answer closes it. Quotes, commas and "and" between symbols are fine, and so
is one step that both pops and answers.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from bbm_tui.core.tasks import extract_answer
from bbm_tui.core.tasks.verdicts import QuestionError, unknown, wrong

PAIRS = {"(": ")", "[": "]", "{": "}", "<": ">"}
CLOSERS = {close: open_ for open_, close in PAIRS.items()}
PLAN = "We should process each input one by one and keep track of the stack configuration."

_SYMBOL = re.compile(r"[\[\](){}<>]")
_STACK_STEP = re.compile(r"^\s*(?P<symbol>[\[\](){}<>])\s*;\s*stack\s*:\s*(?P<stack>.*)$",
                         re.IGNORECASE)
_EMPTY_STACK = re.compile(r"^\s*stack\s*:\s*empty\s*\.?\s*$", re.IGNORECASE)
_END = re.compile(r"reached the end\b.*?\bfinal stack is\s*(?P<stack>.*)$", re.IGNORECASE)
_POP = re.compile(r"\bneed to pop out\s*(?P<symbols>.*)$", re.IGNORECASE)
_NEED = re.compile(r"^\s*so,? we need\s*(?P<symbols>.*)$", re.IGNORECASE)
_COUNT = {"once": 1, "twice": 2, "thrice": 3, "three times": 3, "four times": 4}


def symbols_of(text: str) -> list[str]:
    return _SYMBOL.findall(text)


def push(stack: Sequence[str], symbol: str) -> list[str]:
    """The stack after `symbol`: a closing bracket pops its partner, anything else is pushed
    (a closer that does not match stays on the stack, as in the paper's labelling program)."""
    if stack and symbol in CLOSERS and stack[-1] == CLOSERS[symbol]:
        return list(stack[:-1])
    return [*stack, symbol]


def closing(stack: Sequence[str]) -> list[str]:
    return [PAIRS.get(symbol, symbol) for symbol in reversed(stack)]


def show_stack(stack: Sequence[str]) -> str:
    return " ".join(stack) if stack else "empty"


def _counted_symbols(text: str) -> list[str]:
    """`"[" twice, then "<"` as [ [ < ; plain lists as they are."""
    result: list[str] = []
    pattern = re.compile(r"(?P<symbol>[\[\](){}<>])\s*\"?\s*(?P<count>once|twice|thrice|"
                         r"three times|four times)?", re.IGNORECASE)
    for match in pattern.finditer(text):
        count = _COUNT.get((match.group("count") or "once").lower(), 1)
        result.extend([match.group("symbol")] * count)
    return result


@dataclass
class State:
    symbols: list[str]
    position: int = 0  # symbols processed
    stack: list[str] = field(default_factory=list)
    planned: bool = False  # the plan said
    started: bool = False  # "stack: empty" said
    ended: bool = False  # "we have reached the end"
    popped: bool = False
    answered: bool = False

    @property
    def remaining(self) -> int:
        return len(self.symbols) - self.position


def _split_answer(step: str) -> tuple[str, str | None]:
    answer = extract_answer(step)
    if answer is None:
        return step, None
    cut = re.search(r"(?:\.\s*)?\bso,?\s+the answer is", step, re.IGNORECASE)
    return (step[: cut.start()] if cut else step), answer


def _check_symbol(state: State, symbol: str, stack_text: str) -> None:
    if not state.started:
        state.started = True  # a trace may start without "stack: empty"
    if state.ended:
        raise wrong("it goes on with the input after reaching the end")
    claimed = [] if re.match(r"\s*empty\b", stack_text, re.IGNORECASE) else symbols_of(stack_text)
    if state.remaining <= 0:
        state.stack = claimed
        raise wrong(f"the input has no more symbols; '{symbol}' is not in it")
    expected_symbol = state.symbols[state.position]
    state.position += 1
    expected = push(state.stack, symbol)
    state.stack = claimed
    if symbol != expected_symbol:
        raise wrong(f"the next symbol is {expected_symbol}, not {symbol}")
    if claimed != expected:
        raise wrong(f"after {symbol} the stack is {show_stack(expected)}, "
                    f"not {show_stack(claimed)}")


def _check_end(state: State, stack_text: str) -> None:
    state.ended = True
    if state.remaining > 0:
        raise wrong(f"the input goes on: {state.remaining} more symbol"
                    f"{'s' if state.remaining != 1 else ''}, starting with "
                    f"{state.symbols[state.position]}")
    text = stack_text.strip().rstrip(".")
    claimed = [] if re.match(r"\W*empty\b", text, re.IGNORECASE) else symbols_of(text)
    if claimed != state.stack:
        raise wrong(f"the stack is {show_stack(state.stack)}, not {show_stack(claimed)}")


def _check_pop(state: State, text: str) -> None:
    state.popped = True
    if not state.ended and state.remaining > 0:
        raise wrong(f"the input goes on with {state.symbols[state.position]}")
    expected = list(reversed(state.stack))
    claimed = _counted_symbols(text)
    if not claimed and re.search(r"\b(nothing|all the)\b", text, re.IGNORECASE):
        if re.search(r"\bnothing\b", text, re.IGNORECASE) and not expected:
            return
        raise unknown("it does not say which symbols to pop")
    if claimed != expected:
        raise wrong(f"popping {show_stack(state.stack)} gives {' '.join(expected) or 'nothing'}, "
                    f"not {' '.join(claimed) or 'nothing'}")


def _check_need(state: State, text: str) -> None:
    expected = closing(state.stack)
    claimed = symbols_of(text)
    if not claimed and re.search(r"\bnothing\b|n't need", text, re.IGNORECASE):
        claimed = []
    if claimed != expected:
        raise wrong(f"closing {show_stack(state.stack)} needs {' '.join(expected) or 'nothing'}, "
                    f"not {' '.join(claimed) or 'nothing'}")


def _check_answer(state: State, answer: str) -> None:
    state.answered = True
    if state.remaining > 0:
        raise wrong(f"the input goes on with {state.symbols[state.position]}")
    expected = closing(state.stack)
    claimed = symbols_of(answer)
    if claimed != expected:
        raise wrong(f"the stack {show_stack(state.stack)} is closed by "
                    f"{' '.join(expected) or 'nothing'}, not {' '.join(claimed) or 'nothing'}")
    # The answer is scored by exact match against targets written "] ) ]".
    written = answer.strip().rstrip(".").strip()
    if written != " ".join(expected):
        raise wrong(f"the answer should read '{' '.join(expected)}', not '{written}'")


def check_step(state: State, step: str) -> None:
    if state.answered:
        raise wrong("the trace goes on after its answer")
    body, answer = _split_answer(step)
    body = body.strip()
    symbol_step = _STACK_STEP.match(body)
    end = _END.search(body)
    pop = _POP.search(body)
    need = _NEED.match(body)
    if symbol_step:
        stack_text = symbol_step.group("stack")
        if end:
            stack_text = stack_text[: stack_text.lower().find("now,")] if "now," in \
                stack_text.lower() else stack_text
        _check_symbol(state, symbol_step.group("symbol"), stack_text)
        if end:
            _check_end(state, end.group("stack"))
    elif _EMPTY_STACK.match(body):
        if state.started or state.position:
            raise wrong("the stack was already started")
        state.started = True
    elif body.rstrip(".").lower() == PLAN.rstrip(".").lower():
        if state.started or state.position:
            raise wrong("it starts over")
        state.planned = True
    elif end:
        _check_end(state, end.group("stack"))
    elif pop:
        _check_pop(state, pop.group("symbols"))
    elif need:
        _check_need(state, need.group("symbols"))
    elif answer is None:
        raise unknown("not a Dyck step form the checker knows")
    if answer is not None:
        _check_answer(state, answer)


def start(question_input: str) -> State:
    tokens = question_input.split()
    if not tokens or any(_SYMBOL.fullmatch(token) is None for token in tokens):
        raise QuestionError("the input must be brackets ( ) [ ] { } < > apart")
    return State(tokens)


# -- writing steps (the solver) ---------------------------------------------------------------


def _quoted(symbols: Sequence[str]) -> str:
    return ", ".join(f'"{symbol}"' for symbol in symbols)


def _symbol_step(symbol: str, stack: Sequence[str]) -> str:
    return f"{symbol} ; stack: {show_stack(stack)}"


def _end_step(stack: Sequence[str]) -> str:
    shown = f'"{" ".join(stack)}"' if stack else "empty"
    return f"Now, we have reached the end. The final stack is {shown}."


def _pop_step(stack: Sequence[str]) -> str:
    if not stack:
        return "We will need to pop out nothing."
    return f"We will need to pop out {_quoted(list(reversed(stack)))} one by one in that order."


def _answer_step(closers: Sequence[str]) -> str:
    if not closers:
        return "So, we need nothing. So the answer is"
    return f"So, we need {_quoted(closers)}. So the answer is {' '.join(closers)}"


def write_step(state: State) -> str:
    """The next step a careful trace writes from `state`, in the dataset's phrasing."""
    if not state.planned and not state.started and state.position == 0:
        return PLAN
    if not state.started and state.position == 0:
        return "stack: empty"
    if state.remaining > 0:
        symbol = state.symbols[state.position]
        return _symbol_step(symbol, push(state.stack, symbol))
    if not state.ended:
        return _end_step(state.stack)
    if not state.popped:
        return _pop_step(state.stack)
    return _answer_step(closing(state.stack))


def _wrong_stacks(stack: Sequence[str], symbol: str) -> list[list[str]]:
    """Stacks a slip leaves: the symbol not applied, the top dropped or doubled, a closer
    pushed instead of popping its partner."""
    right = push(stack, symbol)
    candidates = [list(stack), [*stack, symbol]]
    if right:
        candidates += [list(right[:-1]), [*right, right[-1]]]
    return [candidate for candidate in candidates if candidate != right]


def mistakes(state: State, rng: random.Random) -> list[tuple[str, str]]:
    """Plausible wrong versions of the next step, each with the kind of mistake it makes."""
    if not state.started and state.position == 0:
        return []  # the plan and "stack: empty" leave nothing to get wrong
    found: list[tuple[str, str]] = []
    if state.remaining > 0:
        symbol = state.symbols[state.position]
        wrong_stacks = _wrong_stacks(state.stack, symbol)
        if wrong_stacks:
            found.append(("wrong_stack", _symbol_step(symbol, rng.choice(wrong_stacks))))
        if state.remaining > 1 and state.symbols[state.position + 1] != symbol:
            skipped = state.symbols[state.position + 1]
            found.append(("skipped_symbol", _symbol_step(skipped, push(state.stack, skipped))))
        return found
    if not state.ended:
        if state.stack:
            found.append(("wrong_stack", _end_step(state.stack[:-1])))
        return found
    if not state.popped:
        if len(set(state.stack)) > 1 and list(reversed(state.stack)) != list(state.stack):
            found.append(("wrong_order", "We will need to pop out "
                          f"{_quoted(state.stack)} one by one in that order."))
        return found
    closers = closing(state.stack)
    if len(closers) > 1:
        found.append(("wrong_stack", _answer_step(closers[:-1])))
    if len(set(closers)) > 1:
        shuffled = list(closers)
        while shuffled == closers:
            rng.shuffle(shuffled)
        found.append(("wrong_order", _answer_step(shuffled)))
    return found


def random_question(rng: random.Random) -> str:
    """A prefix of a well-nested word, 3 to 60 symbols, that leaves brackets open."""
    while True:
        symbols: list[str] = []
        stack: list[str] = []
        length = rng.randint(3, 60)
        while len(symbols) < length:
            if stack and rng.random() < 0.45:
                symbols.append(PAIRS[stack.pop()])
            else:
                opener = rng.choice("([{<")
                stack.append(opener)
                symbols.append(opener)
        if stack:
            return " ".join(symbols)
