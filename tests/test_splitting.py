"""The split rules (core/generation/splitting.py, docs/DESIGN.md §16): texts made for each edge
case, and the property that matters most: the raw steps joined are the text, byte for byte,
and fed in any pieces the splitter gives the steps the whole text gives."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bbm_tui.core.generation.splitting import make_splitter, split_text, stripped_steps
from bbm_tui.core.types import DEFAULT_SPLIT_RULE, SplitRule

PARAGRAPH, SENTENCE, LINE = SplitRule.PARAGRAPH, SplitRule.SENTENCE, SplitRule.LINE


def cut(text: str, rule: SplitRule) -> list[str]:
    steps = split_text(text, rule)
    assert "".join(steps) == text
    return stripped_steps(steps)


def test_the_default_rule_is_paragraph() -> None:
    assert DEFAULT_SPLIT_RULE is PARAGRAPH


# --- paragraph -------------------------------------------------------------------------------


def test_paragraph_ends_at_each_blank_line_and_keeps_single_newlines() -> None:
    text = "First I list the words.\nThen I sort.\n\nThe first letters are a, b.\n\nSo a b."
    assert cut(text, PARAGRAPH) == [
        "First I list the words.\nThen I sort.",
        "The first letters are a, b.",
        "So a b.",
    ]


def test_paragraph_raw_steps_carry_the_blank_lines_after_them() -> None:
    assert split_text("One.\n\n\nTwo.\n\nThree", PARAGRAPH) == ["One.\n\n\n", "Two.\n\n", "Three"]


def test_a_line_of_spaces_is_a_blank_line() -> None:
    assert cut("One part\n   \t\nanother part", PARAGRAPH) == ["One part", "another part"]


def test_paragraph_crlf_cuts_as_lf() -> None:
    text = "Plan: sort the words.\r\nCheck each.\r\n\r\nWait, check again.\r\n\r\nDone"
    assert split_text(text, PARAGRAPH) == [
        "Plan: sort the words.\r\nCheck each.\r\n\r\n",
        "Wait, check again.\r\n\r\n",
        "Done",
    ]
    assert cut(text, PARAGRAPH) == [
        "Plan: sort the words.\r\nCheck each.",
        "Wait, check again.",
        "Done",
    ]


def test_leading_blank_lines_join_the_first_step() -> None:
    assert split_text("\n\n  First.\n\nSecond.", PARAGRAPH) == ["\n\n  First.\n\n", "Second."]


def test_a_step_longer_than_any_screen_stays_one_step() -> None:
    long_paragraph = " ".join(f"word{i}." for i in range(3000))  # ~27,000 characters
    text = f"{long_paragraph}\n\nShort end."
    assert cut(text, PARAGRAPH) == [long_paragraph, "Short end."]
    # Fed a character at a time, it is still one step, given when the next one begins.
    splitter = make_splitter(PARAGRAPH)
    given_steps = [step for char in text for step in splitter.feed(char)]
    assert given_steps == [f"{long_paragraph}\n\n"]
    assert splitter.close() == ["Short end."]


def test_trailing_text_without_a_boundary_is_a_step() -> None:
    assert cut("Only one paragraph, no blank line after it", PARAGRAPH) == [
        "Only one paragraph, no blank line after it"
    ]


def test_empty_and_whitespace_only_texts() -> None:
    assert split_text("", PARAGRAPH) == []
    assert split_text("\n \n", SENTENCE) == ["\n \n"]  # joined, the text; shown, nothing
    assert stripped_steps(split_text("\n \n", SENTENCE)) == []


# --- line ------------------------------------------------------------------------------------


def test_line_ends_at_each_newline_and_skips_empty_lines() -> None:
    text = "x = 3 + 4\ny = x * 2\n\nso y = 14\n"
    assert split_text(text, LINE) == ["x = 3 + 4\n", "y = x * 2\n\n", "so y = 14\n"]
    assert cut(text, LINE) == ["x = 3 + 4", "y = x * 2", "so y = 14"]


def test_line_crlf() -> None:
    assert cut("a is 1\r\nb is 2\r\n", LINE) == ["a is 1", "b is 2"]


# --- sentence --------------------------------------------------------------------------------


def test_sentence_ends_after_stops_followed_by_whitespace() -> None:
    text = "I need to sort these words. Is zebra last? Yes it is! Now the rest"
    assert cut(text, SENTENCE) == [
        "I need to sort these words.",
        "Is zebra last?",
        "Yes it is!",
        "Now the rest",
    ]


def test_sentence_keeps_closing_quotes_and_brackets_with_the_stop() -> None:
    text = (
        'He said "the list is sorted." Then I checked (twice.) And \u201cit holds.\u201d Done here.'
    )
    assert cut(text, SENTENCE) == [
        'He said "the list is sorted."',
        "Then I checked (twice.)",
        "And \u201cit holds.\u201d",
        "Done here.",
    ]


@pytest.mark.parametrize(
    "abbreviation", ["e.g.", "i.e.", "etc.", "vs.", "Dr.", "Mr.", "Mrs.", "Ms.", "Fig.", "No."]
)
def test_sentence_never_ends_after_an_abbreviation(abbreviation: str) -> None:
    text = f"Consider the first case, {abbreviation} the one with apples. Then the second case."
    assert cut(text, SENTENCE) == [
        f"Consider the first case, {abbreviation} the one with apples.",
        "Then the second case.",
    ]


def test_sentence_abbreviation_in_brackets_and_capitalised() -> None:
    text = "Some words (e.g. apple) come first. E.g. banana comes later in the list."
    assert cut(text, SENTENCE) == [
        "Some words (e.g. apple) come first.",
        "E.g. banana comes later in the list.",
    ]


def test_sentence_never_ends_after_a_single_capital_letter() -> None:
    text = "The book by J. R. Smith is in the U.S. Army library. The next one is DNA. It is long."
    assert cut(text, SENTENCE) == [
        "The book by J. R. Smith is in the U.S. Army library.",
        "The next one is DNA.",
        "It is long.",
    ]


def test_sentence_never_ends_between_digits() -> None:
    text = "The value is 3.5 times 2.25 here. So it is 7.875 in total."
    assert cut(text, SENTENCE) == ["The value is 3.5 times 2.25 here.", "So it is 7.875 in total."]


def test_sentence_a_piece_under_ten_characters_joins_the_next() -> None:
    text = "Wait. Hm. Let me check that again. Ok. Yes, the order holds."
    assert cut(text, SENTENCE) == [
        "Wait. Hm. Let me check that again.",
        "Ok. Yes, the order holds.",
    ]


def test_sentence_ends_at_a_blank_line_without_a_stop() -> None:
    text = "Step one: list the words\n\nStep two: sort them by letter"
    assert cut(text, SENTENCE) == ["Step one: list the words", "Step two: sort them by letter"]


def test_sentence_single_newline_without_a_stop_is_not_an_end() -> None:
    text = "The words are\napple and pear. Sorted they stay."
    assert cut(text, SENTENCE) == ["The words are\napple and pear.", "Sorted they stay."]


def test_sentence_trailing_sentence_without_a_stop_is_a_step() -> None:
    text = "First I sort the words. So the answer is apple pear"
    assert cut(text, SENTENCE) == ["First I sort the words.", "So the answer is apple pear"]


def test_sentence_a_short_trailing_piece_is_still_a_step() -> None:
    assert cut("The list is sorted now. Done", SENTENCE) == ["The list is sorted now.", "Done"]


def test_sentence_crlf() -> None:
    text = "The first word is apple.\r\nThe second is pear.\r\n\r\nno stop here\r\n\r\nEnd"
    assert cut(text, SENTENCE) == [
        "The first word is apple.",
        "The second is pear.",
        "no stop here",
        "End",
    ]


def test_sentence_stop_at_the_end_of_a_feed_waits_for_the_next_character() -> None:
    splitter = make_splitter(SENTENCE)
    assert splitter.feed("It costs 3.") == []
    assert splitter.feed("5 dollars in all.") == []
    assert splitter.feed(" ") == []  # whitespace alone decides nothing yet
    assert splitter.feed("Then") == ["It costs 3.5 dollars in all. "]
    assert splitter.close() == ["Then"]


# --- the property ----------------------------------------------------------------------------

# Text built from the characters the rules look at, so that every rule's edge is reached often.
_ALPHABET = st.sampled_from(
    [*"ab AZ .?!\"')]\n\n\r\t 0123456789", "e.g.", "Dr.", "U.S.", "\r\n", "No. ", "\u201d", "\xa0"]
)
_TEXTS = st.lists(_ALPHABET, max_size=120).map("".join)


@st.composite
def _text_and_pieces(draw: st.DrawFn) -> tuple[str, list[str]]:
    text = draw(st.one_of(_TEXTS, st.text(max_size=80)))
    cuts = sorted(draw(st.sets(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return text, [text[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=400, deadline=None)
@given(_text_and_pieces(), st.sampled_from(list(SplitRule)))
def test_fed_in_any_pieces_the_steps_are_the_whole_texts_and_join_to_it(
    text_and_pieces: tuple[str, list[str]], rule: SplitRule
) -> None:
    text, pieces = text_and_pieces
    whole = split_text(text, rule)
    assert "".join(whole) == text
    splitter = make_splitter(rule)
    fed = [step for piece in pieces for step in splitter.feed(piece)] + splitter.close()
    assert fed == whole
    assert all(step for step in whole)  # no empty slice
    # Every step but the first begins with a character that is not whitespace.
    assert all(not step[0].isspace() for step in whole[1:])


def test_sentence_a_piece_of_exactly_ten_characters_stands() -> None:
    assert cut("Wait. Hmm. Let me check.", SENTENCE) == ["Wait. Hmm.", "Let me check."]
