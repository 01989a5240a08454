"""Multistep arithmetic: read, check and write steps in the dataset's phrasing (docs/DESIGN.md §12).

    This equation can be written as "A - B", where A = (-3 + 5 * 8 * -4) and B = (9 - 8 * -7 + -9).
    Let's calculate A = (-3 + 5 * 8 * -4) = (-3 + (5 * 8) * -4) = (-3 + (40) * -4) = ... = -163.
    Let's calculate B = ...
    Then, the final equation is A - B = -163 - 56 = -219. So the answer is -219

The checker judges every `=` by value (exact fractions): both sides of each must be equal, as
the guidelines ask (the paper's annotation guidelines; an order of operations broken changes the
value and is caught). The split into letters must give back the question's value, a letter
must be worked out from the expression it was given, the final equation must be the split's
with the letters' values, and the answer must be the value the chain reached.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from bbm_tui.core.tasks import extract_answer
from bbm_tui.core.tasks.verdicts import QuestionError, unknown, wrong

# -- expressions ----------------------------------------------------------------------------


class ExpressionError(ValueError):
    pass


@dataclass(frozen=True)
class Num:
    value: Fraction


@dataclass(frozen=True)
class Var:
    name: str


@dataclass(frozen=True)
class Group:
    """An expression written in parentheses."""

    inner: Node


@dataclass(frozen=True)
class Neg:
    operand: Node


@dataclass(frozen=True)
class BinOp:
    op: str
    left: Node
    right: Node


Node = Num | Var | Group | Neg | BinOp

_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<var>[A-Z])\b|(?P<op>[-+*/×÷−()]))")
_OPS = {"×": "*", "÷": "/", "−": "-"}


def tokenize(text: str) -> list[str]:
    tokens, position = [], 0
    text = text.strip()
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match or match.end() == position:
            raise ExpressionError(f"cannot read {text[position:position + 10]!r}")
        position = match.end()
        assert match.lastgroup is not None  # _TOKEN matches one of its named groups
        token = match.group(match.lastgroup)
        tokens.append(_OPS.get(token, token))
    return tokens


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens = tokens
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ExpressionError("the expression ends too soon")
        self.position += 1
        return token

    def expression(self) -> Node:
        node = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = BinOp(op, node, self.term())
        return node

    def term(self) -> Node:
        node = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            node = BinOp(op, node, self.unary())
        return node

    def unary(self) -> Node:
        if self.peek() == "-":
            self.take()
            following = self.peek()
            if following is not None and following[0].isdigit():
                return Num(-Fraction(self.take()))
            return Neg(self.unary())
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.atom()

    def atom(self) -> Node:
        token = self.take()
        if token == "(":
            inner = self.expression()
            if self.take() != ")":
                raise ExpressionError("a bracket is not closed")
            return Group(inner)
        if token[0].isdigit():
            return Num(Fraction(token))
        if token.isalpha():
            return Var(token)
        raise ExpressionError(f"unexpected {token!r}")


# Far past any question of the task; the parser and the evaluator recurse, and a hostile
# step must get a verdict, not a RecursionError.
MAX_TOKENS = 600
MAX_NESTING = 40


def parse(text: str) -> Node:
    """Parse an expression; brackets that do not pair up at either end are dropped, as a
    person reading `(-3 + (40 * -4)) - (9 - 8))` would."""
    tokens = tokenize(text)
    if len(tokens) > MAX_TOKENS:
        raise ExpressionError(f"the expression is longer than {MAX_TOKENS} symbols")
    tokens = _balance(tokens)
    if not tokens:
        raise ExpressionError("no expression")
    depth = deepest = 0
    for token in tokens:
        depth += {"(": 1, ")": -1}.get(token, 0)
        deepest = max(deepest, depth)
    if deepest > MAX_NESTING:
        raise ExpressionError(f"brackets nest deeper than {MAX_NESTING}")
    parser = _Parser(tokens)
    node = parser.expression()
    if parser.peek() is not None:
        raise ExpressionError(f"unexpected {parser.peek()!r}")
    return node


def _balance(tokens: list[str]) -> list[str]:
    depth, kept = 0, []
    for token in tokens:
        if token == ")" and depth == 0:
            continue  # a closing bracket with no opening one
        depth += {"(": 1, ")": -1}.get(token, 0)
        kept.append(token)
    while depth > 0:  # opening brackets never closed: drop the first unmatched ones
        index = _first_unmatched_open(kept)
        del kept[index]
        depth -= 1
    return kept


def _first_unmatched_open(tokens: list[str]) -> int:
    stack = []
    for index, token in enumerate(tokens):
        if token == "(":
            stack.append(index)
        elif token == ")":
            stack.pop()
    return stack[0]


def evaluate(node: Node, values: dict[str, Fraction] | None = None) -> Fraction:
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Var):
        if values is None or node.name not in values:
            raise ExpressionError(f"{node.name} has no value")
        return values[node.name]
    if isinstance(node, Group):
        return evaluate(node.inner, values)
    if isinstance(node, Neg):
        return -evaluate(node.operand, values)
    left, right = evaluate(node.left, values), evaluate(node.right, values)
    if node.op == "+":
        return left + right
    if node.op == "-":
        return left - right
    if node.op == "*":
        return left * right
    if right == 0:
        raise ExpressionError("division by zero")
    return left / right


def variables(node: Node) -> list[str]:
    if isinstance(node, Var):
        return [node.name]
    if isinstance(node, Group):
        return variables(node.inner)
    if isinstance(node, Neg):
        return variables(node.operand)
    if isinstance(node, BinOp):
        return variables(node.left) + [n for n in variables(node.right)
                                       if n not in variables(node.left)]
    return []


def show(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value.numerator}/{value.denominator}"


def question_expression(question_input: str) -> str:
    return question_input.strip().rstrip("=").strip()


# -- reading steps --------------------------------------------------------------------------

_SPLIT = re.compile(r'can be written as\s*"(?P<form>[^"]*)"\s*,?\s*where\s+(?P<defs>.*)$',
                    re.IGNORECASE)
_DEFINITION = re.compile(r"\b(?P<name>[A-Z])\s*=\s*")
_CALCULATE = re.compile(r"^\s*let'?s (?:calculate|compute|evaluate)\s+(?P<name>[A-Z])\s*"
                        r"(?:=|:)\s*(?P<chain>.*)$", re.IGNORECASE)
_FINAL = re.compile(r"final equation is\s*:?\s*(?P<chain>.*)$", re.IGNORECASE)
_RECALL = re.compile(r"^\s*let'?s recall that the order of operations", re.IGNORECASE)


def _definitions(text: str) -> dict[str, str]:
    """`A = (...) and B = (...), and C = (...).` as {"A": "(...)", ...}."""
    matches = list(_DEFINITION.finditer(text))
    result = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        body = text[match.end():end].strip()
        body = re.sub(r"(?:,|\band\b|\.)+\s*$", "", body).strip()
        body = re.sub(r"(?:,\s*)?\band$", "", body).strip().rstrip(",").strip()
        result[match.group("name")] = body
    return result


def _chain_parts(chain: str) -> list[str]:
    chain = chain.strip()
    chain = re.sub(r"\.\s*$", "", chain)
    return [part.strip() for part in chain.split("=") if part.strip()]


# -- checking -------------------------------------------------------------------------------


@dataclass
class State:
    question: Node
    definitions: dict[str, Node] = field(default_factory=dict)
    form: Node | None = None
    values: dict[str, Fraction] = field(default_factory=dict)
    final: Fraction | None = None
    answered: bool = False


def _parse(text: str) -> Node:
    try:
        return parse(text)
    except ExpressionError as error:
        raise unknown(f"cannot read '{text}': {error}") from None


def _value(node: Node, values: dict[str, Fraction] | None = None) -> Fraction:
    try:
        return evaluate(node, values)
    except ExpressionError as error:
        raise unknown(str(error)) from None


def _check_chain(parts: Sequence[str], values: dict[str, Fraction]) -> tuple[Fraction, str | None]:
    """The value the chain ends on, and what is wrong with its first false `=`.

    One expression that is off, between two that agree with each other (`(-6 - -7 + 2) =
    (-6 + 7 - 2) = (3 - 4)`), is a slip of the pen the chain does not build on: the
    annotators let such typos pass ("typos are allowed as long as the logic is still
    correct"), and so does the checker."""
    worth = [_value(_parse(text), values) for text in parts]
    index = 1
    while index < len(parts):
        before, after = worth[index - 1], worth[index]
        if before != after:
            if index + 1 < len(parts) and worth[index + 1] == before:
                index += 2  # a typo: the next expression goes on from the right value
                continue
            left, right = parts[index - 1], parts[index]
            if _is_number(right):
                return worth[-1], f"{left} is {show(before)}, not {show(after)}"
            return worth[-1], f"{left} is {show(before)}, but {right} is {show(after)}"
        index += 1
    return worth[-1], None


def _is_number(text: str) -> bool:
    return re.fullmatch(r"\(?\s*-?\d+(?:\.\d+)?\s*\)?", text.strip()) is not None


def _check_split(state: State, match: re.Match[str]) -> None:
    if state.form is not None:
        raise wrong("the equation was already split")
    form = _parse(match.group("form"))
    texts = _definitions(match.group("defs"))
    if not texts:
        raise unknown("no letters defined in this step")
    definitions = {name: _parse(text) for name, text in texts.items()}
    state.form, state.definitions = form, definitions
    used = variables(form)
    undefined = [name for name in used if name not in definitions]
    if undefined:
        raise wrong(f"{', '.join(undefined)} {'is' if len(undefined) == 1 else 'are'} used "
                    "but never defined")
    unused = [name for name in definitions if name not in used]
    if unused:
        raise wrong(f"{', '.join(unused)} {'is' if len(unused) == 1 else 'are'} defined "
                    "but not used")
    for name, node in definitions.items():
        if isinstance(node, Num) or (isinstance(node, Group) and isinstance(node.inner, Num)):
            state.values[name] = _value(node)  # a plain number needs no working out
    split_value = _value(form, {name: _value(node) for name, node in definitions.items()})
    question_value = _value(state.question)
    if split_value != question_value:
        raise wrong(f"the split is worth {show(split_value)}, but the question is worth "
                    f"{show(question_value)}")


def _check_calculation(state: State, name: str, chain: str) -> None:
    parts = _chain_parts(chain)
    if not parts:
        raise unknown("no calculation found")
    value, problem = _check_chain(parts, {})
    state.values[name] = value
    if name not in state.definitions:
        if state.form is None:
            raise wrong(f"{name} was never defined")
        raise wrong(f"{name} is not one of the letters of the split")
    defined = _value(state.definitions[name])
    start = _value(_parse(parts[0]))
    if start != defined:
        raise wrong(f"{name} was defined as {_text_of(state, name)}, worth {show(defined)}, "
                    f"not {show(start)}")
    if problem:
        raise wrong(problem)
    if len(parts) == 1 and not _is_number(parts[0]):
        raise wrong(f"it gives no value for {name}")


def _text_of(state: State, name: str) -> str:
    return render(state.definitions[name])


def _check_final(state: State, chain: str, answer: str | None) -> None:
    parts = _chain_parts(chain)
    if not parts:
        raise unknown("no final equation found")
    first = _parse(parts[0])
    names = variables(first)
    missing = [name for name in names if name not in state.values]
    if missing:
        raise wrong(f"{', '.join(missing)} {'has' if len(missing) == 1 else 'have'} not been "
                    "calculated")
    if names and state.form is not None:
        defined = {name: _value(node) for name, node in state.definitions.items()}
        if set(names) - set(defined) or _value(first, defined) != _value(state.form, defined):
            raise wrong(f"the final equation is not the split {render(state.form)}")
    value, problem = _check_chain(parts, state.values)
    state.final = value
    if problem:
        raise wrong(problem)
    if not names:
        question_value = _value(state.question)
        if _value(first) != question_value:
            raise wrong(f"the final equation is worth {show(_value(first))}, but the question "
                        f"is worth {show(question_value)}")


def _check_answer(state: State, answer: str) -> None:
    state.answered = True
    if state.final is None:
        raise wrong("it gives an answer before working it out")
    try:
        said = Fraction(answer.strip().rstrip(".").replace("−", "-").replace(" ", ""))
    except ValueError:
        raise wrong(f"'{answer.strip()}' is not a number") from None
    if said != state.final:
        raise wrong(f"the equation gives {show(state.final)}, not {show(said)}")


def check_step(state: State, step: str) -> None:
    if state.answered:
        raise wrong("the trace goes on after its answer")
    answer = extract_answer(step)
    body = step[: step.lower().rfind("the answer is")] if answer is not None else step
    body = re.sub(r"\s*\bSo\s*,?\s*$", "", body.strip())
    split = _SPLIT.search(body)
    calculation = _CALCULATE.match(body)
    final = _FINAL.search(body)
    if split:
        _check_split(state, split)
    elif calculation:
        _check_calculation(state, calculation.group("name"), calculation.group("chain"))
    elif final:
        _check_final(state, final.group("chain"), answer)
    elif _RECALL.match(body):
        pass  # the prompt's reminder of the order of operations
    elif answer is None:
        raise unknown("not an arithmetic step form the checker knows")
    if answer is not None:
        _check_answer(state, answer)


def start(question_input: str) -> State:
    try:
        return State(parse(question_expression(question_input)))
    except ExpressionError as error:
        raise QuestionError(f"cannot read the expression: {error}") from None


# -- writing expressions --------------------------------------------------------------------


def render(node: Node) -> str:
    if isinstance(node, Num):
        return show(node.value)
    if isinstance(node, Var):
        return node.name
    if isinstance(node, Group):
        return f"({render(node.inner)})"
    if isinstance(node, Neg):
        return f"-{render(node.operand)}"
    return f"{render(node.left)} {node.op} {render(node.right)}"



# -- writing steps (the solver) ---------------------------------------------------------------


def _atomic(node: Node) -> bool:
    return isinstance(node, Num) or (isinstance(node, Group) and isinstance(node.inner, Num))


def _number(node: Node) -> Fraction:
    if isinstance(node, Group):
        return _number(node.inner)
    assert isinstance(node, Num)
    return node.value


def _plain(operation: BinOp | Neg) -> BinOp | Neg:
    """The operation with `(40)` operands read as `40`, as the prompt writes them."""
    def unwrap(node: Node) -> Node:
        return Num(_number(node)) if _atomic(node) else node
    if isinstance(operation, Neg):
        return Neg(unwrap(operation.operand))
    return BinOp(operation.op, unwrap(operation.left), unwrap(operation.right))


def _next_operation(node: Node) -> BinOp | Neg | None:
    """The first operation, left to right, whose operands are plain numbers: working it out
    never breaks the order of operations, which the parsed tree already holds."""
    if isinstance(node, Group):
        return _next_operation(node.inner)
    if isinstance(node, Neg):
        return node if _atomic(node.operand) else _next_operation(node.operand)
    if isinstance(node, BinOp):
        if _atomic(node.left) and _atomic(node.right):
            return node
        return _next_operation(node.left) or _next_operation(node.right)
    return None


def _children(node: Node) -> list[Node]:
    if isinstance(node, Group):
        return [node.inner]
    if isinstance(node, Neg):
        return [node.operand]
    if isinstance(node, BinOp):
        return [node.left, node.right]
    return []


def _replace(node: Node, target: Node, new: Node) -> Node:
    if node is target:
        return new
    if isinstance(node, Group):
        return Group(_replace(node.inner, target, new))
    if isinstance(node, Neg):
        return Neg(_replace(node.operand, target, new))
    if isinstance(node, BinOp):
        return BinOp(node.op, _replace(node.left, target, new), _replace(node.right, target, new))
    return node


def _bracket_around(node: Node, target: Node) -> Group | None:
    """The bracket written right around `target`, if there is one."""
    if isinstance(node, Group) and node.inner is target:
        return node
    for child in _children(node):
        found = _bracket_around(child, target)
        if found is not None:
            return found
    return None


def reduction(node: Node, slip: tuple[int, Fraction] | None = None) -> list[str]:
    """What a careful chain writes after `node`, one operation per `=` in the prompt's style:
    the operation about to be worked out in brackets, then its value in brackets, the last
    value bare. `slip` = (which operation, how far off) makes that operation's value wrong,
    and the chain goes on from it (an arithmetic slip)."""
    parts: list[str] = []
    done = 0
    while (operation := _next_operation(node)) is not None:
        plain = _plain(operation)
        value = evaluate(plain)
        if slip is not None and slip[0] == done:
            value += slip[1]
        done += 1
        if node is operation or (isinstance(node, Group) and node.inner is operation):
            parts.append(show(value))
            break
        target: Node | None = _bracket_around(node, operation)
        if target is None:
            target = Group(plain)
            node = _replace(node, operation, target)
            parts.append(render(node))
        node = _replace(node, target, Group(Num(value)))
        parts.append(render(node))
    return parts


def operations(node: Node) -> int:
    return sum(1 for _ in _walk_operations(node))


def _walk_operations(node: Node) -> Iterator[Node]:
    for child in _children(node):
        yield from _walk_operations(child)
    if isinstance(node, BinOp | Neg):
        yield node


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def split(question: Node) -> tuple[Node, dict[str, Node]]:
    """The prompt's split: each innermost bracket of the question becomes a letter."""
    root = question.inner if isinstance(question, Group) else question
    definitions: dict[str, Node] = {}

    def letter_for(node: Node) -> Node:
        if isinstance(node, Group) and not any(isinstance(n, Group) for n in _descendants(node)):
            if len(definitions) >= len(LETTERS):
                raise QuestionError("too many brackets to name with letters")
            name = LETTERS[len(definitions)]
            definitions[name] = node
            return Var(name)
        if isinstance(node, Group):
            return Group(letter_for(node.inner))
        if isinstance(node, Neg):
            return Neg(letter_for(node.operand))
        if isinstance(node, BinOp):
            return BinOp(node.op, letter_for(node.left), letter_for(node.right))
        return node

    form = letter_for(root)
    if not definitions:
        definitions["A"] = Group(root)
        form = Var("A")
    return form, definitions


def _descendants(node: Node) -> list[Node]:
    found: list[Node] = []
    for child in _children(node):
        found.append(child)
        found.extend(_descendants(child))
    return found


def _split_step(form: Node, definitions: dict[str, Node]) -> str:
    where = " and ".join(f"{name} = {render(node)}" for name, node in definitions.items())
    return f'This equation can be written as "{render(form)}", where {where}.'


def _calculation_step(name: str, definition: Node, slip: tuple[int, Fraction] | None = None
                      ) -> str:
    chain = [render(definition), *reduction(definition, slip)]
    return f"Let's calculate {name} = {' = '.join(chain)}."


def _substitute(node: Node, values: dict[str, Fraction]) -> Node:
    if isinstance(node, Var):
        return Num(values[node.name])
    if isinstance(node, Group):
        return Group(_substitute(node.inner, values))
    if isinstance(node, Neg):
        return Neg(_substitute(node.operand, values))
    if isinstance(node, BinOp):
        return BinOp(node.op, _substitute(node.left, values), _substitute(node.right, values))
    return node


def _final_step(form: Node, substituted: Node, slip: tuple[int, Fraction] | None = None) -> str:
    chain = [render(form), render(substituted), *reduction(substituted, slip)]
    if _atomic(substituted):
        chain = [render(form), show(_number(substituted))]
    value = chain[-1]
    return f"Then, the final equation is {' = '.join(chain)}. So the answer is {value}"


def _next_letter(state: State) -> str | None:
    return next((name for name in state.definitions if name not in state.values), None)


def _final_values(state: State) -> dict[str, Fraction]:
    assert state.form is not None
    missing = [name for name in variables(state.form) if name not in state.values]
    if missing:
        raise QuestionError(f"the split uses {', '.join(missing)}, which it never defines")
    return state.values


def write_step(state: State) -> str:
    """The next step a careful trace writes from `state`, in the dataset's phrasing."""
    if state.form is None:
        return _split_step(*split(state.question))
    name = _next_letter(state)
    if name is not None:
        return _calculation_step(name, state.definitions[name])
    return _final_step(state.form, _substitute(state.form, _final_values(state)))


def _slips(node: Node, rng: random.Random) -> tuple[int, Fraction] | None:
    """A slip that changes the value the chain ends on (a slip times zero would not)."""
    count = operations(node)
    if count == 0:
        return None
    truth = evaluate(node)
    for _ in range(8):
        slip = (rng.randrange(count), Fraction(rng.choice((-10, -2, -1, 1, 2, 10))))
        parts = reduction(node, slip)
        if parts and evaluate(parse(parts[-1])) != truth:
            return slip
    return None


def _copy_error(state: State, rng: random.Random) -> str | None:
    """The split with one number of one letter's bracket miscopied."""
    form, definitions = split(state.question)
    truth = evaluate(state.question)
    names = list(definitions)
    for _ in range(8):
        name = rng.choice(names)
        tokens = tokenize(render(definitions[name]))
        numbers = [i for i, token in enumerate(tokens) if token[0].isdigit()]
        if not numbers:
            continue
        index = rng.choice(numbers)
        tokens[index] = str(int(Fraction(tokens[index])) + rng.choice((1, 2, 3)))
        changed = dict(definitions)
        changed[name] = parse(" ".join(tokens))
        values = {key: evaluate(node) for key, node in changed.items()}
        if evaluate(form, values) != truth:
            return _split_step(form, changed)
    return None


def _wrong_order(definition: Node, rng: random.Random) -> str | None:
    """An addition or subtraction worked out before the multiplication that follows it."""
    tokens = tokenize(render(definition))
    spots = [i for i in range(1, len(tokens) - 3)
             if tokens[i] in "+-" and tokens[i - 1] not in "(+-*/" and tokens[i + 2] in "*/"]
    rng.shuffle(spots)
    for spot in spots:
        start = spot - 1
        wrong_tokens = [*tokens[:start], "(", *tokens[start:spot + 2], ")", *tokens[spot + 2:]]
        wrong_node = parse(" ".join(wrong_tokens))
        if evaluate(wrong_node) != evaluate(definition):
            return " = ".join([render(wrong_node), *reduction(wrong_node)])
    return None


def mistakes(state: State, rng: random.Random) -> list[tuple[str, str]]:
    """Plausible wrong versions of the next step, each with the kind of mistake it makes."""
    found: list[tuple[str, str]] = []
    if state.form is None:
        miscopied = _copy_error(state, rng)
        return [("copy_error", miscopied)] if miscopied else []
    name = _next_letter(state)
    if name is not None:
        definition = state.definitions[name]
        slip = _slips(definition, rng)
        if slip:
            found.append(("arithmetic_slip", _calculation_step(name, definition, slip)))
        wrong_order = _wrong_order(definition, rng)
        if wrong_order:
            found.append(("wrong_order",
                          f"Let's calculate {name} = {render(definition)} = {wrong_order}."))
        return found
    values = _final_values(state)
    substituted = _substitute(state.form, values)
    slip = _slips(substituted, rng)
    if slip:
        found.append(("arithmetic_slip", _final_step(state.form, substituted, slip)))
    names = variables(state.form)
    if names:
        wrong_values = dict(values)
        wrong_name = rng.choice(names)
        wrong_values[wrong_name] += rng.choice((-1, 1)) * (1 + rng.randrange(3))
        if evaluate(state.form, wrong_values) != evaluate(state.form, values):
            found.append(("wrong_value", _final_step(state.form,
                                                     _substitute(state.form, wrong_values))))
    return found


def random_question(rng: random.Random) -> str:
    """A question in BIG-bench's form: two or four brackets of four numbers from -9 to 9,
    joined by + - *, in one more level of brackets."""
    def leaf() -> str:
        numbers = [str(rng.randint(-9, 9)) for _ in range(rng.choice((3, 4)))]
        text = numbers[0]
        for number in numbers[1:]:
            text += f" {rng.choice('+-*')} {number}"
        return f"({text})"

    def pair(left: str, right: str) -> str:
        return f"({left} {rng.choice('+-*')} {right})"

    if rng.random() < 0.5:
        return f"{pair(leaf(), leaf())} ="
    return f"{pair(pair(leaf(), leaf()), pair(leaf(), leaf()))} ="
