"""What surrounds a final answer (rldata.verify.alternatives), through extract_answers."""

from __future__ import annotations

import pytest

from rldata.verify.alternatives import rate_start, retracted, split_parenthetical
from rldata.verify.extract import LIST_SEP, extract_answers
from rldata.verify.numbers import NUMBER


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She needs 24 tiles. (The room is 4 by 6 feet.)", ["24"]),
        ("The answer is 3 (since 3 < 7).", ["3"]),
        ("Answer: 60 (the total number of minutes)", ["60"]),
        ("\\boxed{6} (or possibly 7 if we count the start).", ["6", "7"]),  # an alternative: a hedge
        ("The answer is 50 (or 49 without the endpoint).", ["50", "49"]),
        ("The answer is 7. (Wait, actually it is 8.)", ["8"]),  # a revision is read, not dropped
    ],
)
def test_parentheticals(text, expected):
    assert extract_answers(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12 if the boxes are identical and 15 if they are distinct.", ["15", "12"]),
        ("The answer is 1. However, if we count the empty set, it would be 2", ["1", "2"]),
        ("The answer is 5, unless we count zero, in which case it is 6.", ["5", "6"]),
        ("She has 20 stickers, assuming none were lost; otherwise 18.", ["18", "20"]),
        ("If repetition is allowed the count is 9; without repetition it is 6.", ["6", "9"]),
        ("The answer is 7, or 8 if you include today.", ["7", "8"]),
        # conditions that offer no other answer
        ("If we multiply 3 by 3 we get 9, so the answer is 9.", ["9"]),
        ("If each box holds 3, then 12 / 3 = 4 boxes are needed.", ["4"]),
        ("The answer is \\boxed{12}. If you want to check: 3 \\times 4 = 12.", ["12"]),
        ("\\boxed{18}\n\nCheck: 18 is divisible by 3 or 6.", ["18"]),
        ("We need 3 umbrellas if it rains.", ["3"]),
    ],
)
def test_conditional_alternatives(text, expected):
    assert extract_answers(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Step 1: \\boxed{6} cookies. Step 2: 6 \\times 3 = \\boxed{18}.", ["18"]),
        ("Part (a): \\boxed{7}\n\nFinal answer: \\boxed{42}", ["42"]),
        ("x = \\boxed{5}, so x^2 = \\boxed{25}.", ["25"]),
        ("The sum is \\boxed{3} + \\boxed{4} = \\boxed{7}.", ["7"]),
        # not a conclusion, or a hedge among the boxes: every box counts
        ("So a = \\boxed{3} and b = \\boxed{4}.", ["4", "3"]),
        ("\\boxed{41} or maybe \\boxed{42}", ["42", "41"]),
        ("It could be \\boxed{8}. Then again, so \\boxed{12}.", ["12", "8"]),
        ("\\boxed{3} \\boxed{4}", ["4", "3"]),
    ],
)
def test_intermediate_boxes(text, expected):
    assert extract_answers(text) == expected


@pytest.mark.parametrize(
    ("after", "taken_back"),
    [
        (" Wait, she saves for 6 weeks, so the total is 8 × 6 =", True),  # cut off mid-computation
        (" Wait, I forgot the bonus round, which adds", True),
        (" Hmm, I made a mistake in step 2.", True),  # says it was wrong
        (" Actually, that is correct.", False),
        (" Wait, let me recompute: 3 + 4 = 7, times 2 is", False),  # a check, cut off: the answer stands
        (" The rest of the work is shown above.", False),  # no retraction
    ],
)
def test_retractions(after, taken_back):
    assert retracted(after) is taken_back
    assert extract_answers("The answer is 12." + after) == ([] if taken_back else ["12"])


@pytest.mark.parametrize(
    ("sentence", "answer"),
    [
        ("The car travels 150 miles in 3 hours at 50 mph.", "150"),
        ("In total she rides 96 km in 4 hours, averaging 24 km/h.", "96"),
        ("She earns $400 over 5 days.", "400"),
        ("The chance is 1 in 6.", "6"),  # odds, not a rate: no unit before "in"
        ("She sells 12 cookies at $2 each, earning $24.", "24"),
    ],
)
def test_rate_phrases_after_the_answer(sentence, answer):
    nums = list(NUMBER.finditer(sentence))
    assert nums[rate_start(sentence, nums)].group() == answer
    assert extract_answers(sentence) == [answer]


def test_split_parenthetical_keeps_math_and_revisions():
    assert split_parenthetical("so f(x) = 2(x + 1)") == ("so f(x) = 2(x + 1)", [])
    assert split_parenthetical("The point is (3, 4).") == ("The point is (3, 4).", [])
    assert split_parenthetical("It is 5 (five apples).") == ("It is 5.", [])
    assert LIST_SEP not in "".join(extract_answers("The roots are 2 (double)."))
