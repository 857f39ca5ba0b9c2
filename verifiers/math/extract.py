"""Finding the final answer in a text (stage 1 of the math verifier, before normalize).

A model's response:

    "... so we try \\boxed{2}. No: x = \\boxed{3} and y = \\boxed{4}."   -> "x=3, y=4"
    "... \\boxed{4} was a guess. Final Answer: the area is $6\\sqrt3$."    -> "6\\sqrt3"
    "Final Answer: The total number of apples is 15."                    -> "15"

  1. Boxes (\\boxed{...}, \\fbox{...}, nested braces): the last complete one, together
     with the boxes just before it that are joined to it only by connectives (spaces,
     `$`, commas, semicolons, "and", "or", part labels "(b)", a label such as "y ="):
     one answer spread over several boxes. Boxes separated by words are earlier
     attempts, not part of it.
     A group keeps its labels: "x = \\boxed{3} and y = \\boxed{4}" is "x=3, y=4".
     Checked against a reference of n parts, a group of fewer boxes gives way to the
     last n boxes: "the maximum is \\boxed{5} and the minimum is \\boxed{1}" answers
     "5, 1" (the vote, which must not read the reference, keeps the last group).
  2. A "final answer" statement written after the last box (and holding some maths)
     is the answer instead: the box was not the last word.
  3. Without boxes: the statement after the last "final answer" / "the answer is".
  4. Without either (unanchored="last_expression", a setting): the last mathematical
     expression of the final sentence, as math-verify reads such responses.

A statement is read up to the end of its sentence, for the value it states: of its
last "is"/"are"/"equals", the side that holds maths ("The value of $x$ is 5" -> "5"),
and there its first group of inline maths ($...$, \\(...\\)), grouped as boxes are
("$x = 4$ for $n = 3$" -> "x = 4"), or else the maths in its words, the words around
it dropped ("There are 15 apples in total" -> "15") but a unit right after it kept
("24 cm"). A statement that takes its value back ("5 is wrong") states none.

Words right before an answer that deny it drop it, box or maths ("$4$, not $3$" -> 4,
"the answer is not \\boxed{3}" -> nothing, "rather than", "instead of"); the group
before it answers, if there is one. After a box, a "final answer:" or "final answer is"
followed by prose comments on the box and states nothing ("final answer: it took 3
steps").

A reference solution boxes nothing but its answer, so `extract_reference` joins all
its boxes ("\\boxed{1} and \\boxed{2}" -> "1, 2"), where a response only counts its last
group. Both are linear in the text: boxes are scanned from the end, and a box that
never closes bounds the scan of every box before it. Standard library only.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from jury.protocol.boxed import group_end

from .items import TAIL_MEANINGS, UNIT_WORDS
from .normalize import normalize
from .units import read_unit

if TYPE_CHECKING:  # the name only: check processes need not load the config module and yaml
    from jury.protocol.config import Unanchored

MAX_TEXT_CHARS = 1_000_000  # only this many trailing characters are read
MAX_EXTRACTED_CHARS = 2_000  # an answer longer than this is not an answer

_BOX = re.compile(r"\\(?:boxed|fbox)")
_TOKEN = re.compile(r"[^\s$]+")
# what may stand between two boxes (or two inline formulas) of one answer
_JOINER = re.compile(
    r"(?:\s|\$|\\[()\[\]]|[,;&:]|\\\\|\\(?:quad|qquad|[,;: ])|\band\b|\bor\b|\\text\{\s*(?:(?:and|or|,)\s*)?\}"
    r"|\((?:[a-h]|i{1,3}|iv|vi?)\))*",  # part labels: (a) \boxed{5}; (b) \boxed{7}
    # (no two alternatives start alike, so a long gap fails in linear time)
    re.IGNORECASE,
)
# a label right before a box: "x = ", "$y_1 = $", "AB="
_LABEL_BEFORE = re.compile(r"(?<![A-Za-z\\])([A-Za-z]{1,3}(?:_\{?[A-Za-z0-9]{1,3}\}?)?)\s*=\s*(?:\$|\\\(|\s)*$")
# after a "final answer is" that follows the boxes: a word of two letters or more, not maths, first
_COMMENT_AFTER_IS = re.compile(r"(?:(?<=is)|(?<=:))[ \t*]*(?!the\b)[A-Za-z]{2,}\b", re.IGNORECASE)
_FINAL_ANSWER = re.compile(r"final answer\**\s*(?:is\b|:)|final answer\**[ \t]*\n", re.IGNORECASE)
_ANSWER_IS = re.compile(
    r"(?:final answer\**\s*(?:is\b|:)|final answer\**[ \t]*\n|the answer\s*(?:is\b|:))\**\s*:?\**\s*", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"\.(?:\s|$)")
_SENTENCE_BREAK = re.compile(r"[.!?](?:\s|$)|\n")
_INLINE_MATH = re.compile(r"\$\$?([^$]+?)\$\$?|\\\((.+?)\\\)")
_DISPLAY_OR_INLINE = re.compile(r"\$\$(.+?)\$\$|\$([^$]+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_VERB = re.compile(r"\s(?:is|are|equals|was|were)\s", re.IGNORECASE)
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}(?![A-Za-z])")
_TEXT_OR_WORD = re.compile(r"\\text\{[^{}]*\}|" + _WORD.pattern)
_HAS_MATHS = re.compile(r"[\d$\\]")
# maths written in plain words, in a sentence without anchor: "so f(x)=x", "hence x^2"
_HAS_PLAIN_MATHS = re.compile(r"[\d$\\=^<>+*/]")
_TEXT_BODY = re.compile(r"\\text\{[^{}]*\}")
_MATH_WORDS = frozenset("and or sin cos tan cot sec csc log exp sqrt".split())
# words before a value in a stated answer that say it is not the value ("the answer is not 3")
_QUALIFIERS = frozenset("not except excluding besides never neither nor than least most less more fewer greater "
                        "over under".split())


class _Span(NamedTuple):
    start: int  # of `\boxed` (or of the formula's opening `$`)
    end: int  # past the closing brace
    body: str


def _boxes_backwards(text: str):
    """Complete boxes, last first. A box that never closes means no earlier box closes
    past its start either, so later scans stop there: linear time overall."""
    limit = len(text)
    for m in reversed(list(_BOX.finditer(text))):
        pos = m.end()
        while pos < limit and text[pos] == " ":
            pos += 1
        if pos < limit and text[pos] == "{":
            end = group_end(text, pos, limit)
            if end is None:
                limit = m.start()
                continue
            yield _Span(m.start(), end, text[pos + 1 : end - 1])
        else:  # `\boxed 5`: the next space-delimited token
            tok = _TOKEN.match(text, pos, limit)
            if tok:
                yield _Span(m.start(), tok.end(), tok.group(0))


def _label(text: str, start: int) -> str | None:
    m = _LABEL_BEFORE.search(text, max(0, start - 40), start)
    return m.group(1) if m else None


def _joined(text: str, spans: list[_Span]) -> str:
    """Several boxes of one answer as a list, each with the label written before it. A box
    that repeats an earlier one (same label, same normal form) is the same answer said
    again ("so $\\boxed{5}$ ... hence $\\boxed{5}$"), not a second copy in the list."""
    if len(spans) == 1:
        return spans[0].body
    parts, seen = [], set()
    for span in spans:
        label = _label(text, span.start)
        key = (label, normalize(span.body))
        if key not in seen:
            seen.add(key)
            parts.append(f"{label}={span.body}" if label else span.body)
    return ", ".join(parts)


def _last_group(text: str, spans) -> list[_Span]:
    """The last span and those before it joined to it only by connectives (and labels)."""
    group: list[_Span] = []
    for span in spans:
        if group:
            gap_end = group[-1].start
            label = _LABEL_BEFORE.search(text, max(span.end, gap_end - 40), gap_end)
            if label:
                gap_end = label.start()
            if span.end > gap_end or not _JOINER.fullmatch(text, span.end, gap_end):
                break
        group.append(span)
    return group[::-1]


# words right before an answer that deny it: "$4$, not $3$", "the answer is not \\boxed{3}", "$4$
# rather than $3$", "instead of $3$", "not equal to $3$"
_DENIAL = re.compile(r"\b(?:not|never|nor|neither|except|excluding|isn't|aren't|wasn't|can't|cannot|rather\s+than|"
                     r"instead\s+of)\b", re.IGNORECASE)
# what a sentence may say of the value before its verb that takes it back: "5 is wrong", "5 is not right"
_JUDGED_WRONG = re.compile(r"\s*(?:not\b|wrong\b|incorrect\b|false\b|invalid\b|impossible\b|a mistake\b|an error\b)",
                           re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[.;:!?,\n]|\$")  # a clause, or the maths before it, ends where the words begin


def _denied(text: str, floor: int, start: int) -> bool:
    """Do the last few words before text[start] (back to the clause break or the previous answer at
    `floor`, at most four words) deny what follows?"""
    gap = text[floor:start]
    breaks = list(_CLAUSE_BREAK.finditer(gap))
    clause = gap[breaks[-1].end():] if breaks else gap
    clause = re.sub(r"\\text\{([^{}]*)\}", r"\1", clause).replace("(", " ")
    return bool(_DENIAL.search(" ".join(clause.split()[-4:])))


def _affirmed_group(text: str, spans) -> list[_Span]:
    """The last group of spans (_last_group) that the words before it do not deny: "the answer is
    $4$, not $3$" answers 4, "the answer is not $3$" answers nothing (a denied group, and none
    before it)."""
    spans = list(spans)
    while spans:
        group = _last_group(text, iter(spans))
        if not group:
            return []
        earlier = [s for s in spans if s.end <= group[0].start]
        if not _denied(text, max((s.end for s in earlier), default=0), group[0].start):
            return group
        spans = earlier
    return []


def _first_affirmed_group(text: str, spans: list[_Span]) -> list[_Span]:
    """The first group of spans (the first and those after it joined to it by connectives) that the
    words before it do not deny: what a statement states right after its verb ("the answer is $4$
    for $n = 3$" -> 4; "is $3$ or $4$" -> both; "is $4$, not $3$" -> 4; "is not $3$ but $4$" -> 4)."""
    k = 0
    while k < len(spans):
        group = [spans[k]]
        for span in spans[k + 1:]:
            gap_end = span.start
            label = _LABEL_BEFORE.search(text, max(group[-1].end, gap_end - 40), gap_end)
            if label:
                gap_end = label.start()
            if group[-1].end > gap_end or not _JOINER.fullmatch(text, group[-1].end, gap_end):
                break
            group.append(span)
        floor = spans[k - 1].end if k else 0
        if not _denied(text, floor, group[0].start):
            return group
        k += len(group)
    return []


def _statement(text: str, start: int) -> str | None:
    """The answer stated from text[start] to the end of the sentence."""
    rest = text[start : start + 4 * MAX_EXTRACTED_CHARS].split("\n", 1)[0]
    return _sentence_value(_SENTENCE_END.split(rest, maxsplit=1)[0])


def _sentence_value(sentence: str) -> str | None:
    """The value a sentence states. Of its last "is"/"are"/"equals", the side that holds
    maths ("The value of $x$ is 5" -> 5, "15 is the number of apples" -> 15); there,
    the inline maths grouped as boxes are, or else the maths written in words with
    the words around it dropped ("There are 15 apples in total" -> 15) but a unit
    right after it kept ("12 meters"); words in the middle stay as \\text{}."""
    rest = sentence.strip(" *")
    verbs = list(_VERB.finditer(rest))
    if verbs:
        before, after = rest[: verbs[-1].start()], rest[verbs[-1].end() :]
        if _has_maths(before) and not _has_maths(after):
            if _JUDGED_WRONG.match(after):  # "5 is wrong", "5 is not right": the value is taken back
                return None
            rest = before
        else:
            rest = after
    formulas = [_Span(m.start(), m.end(), m.group(1) or m.group(2)) for m in _INLINE_MATH.finditer(rest)]
    if formulas:
        group = _first_affirmed_group(rest, formulas)
        return _joined(rest, group) if group else None
    if _has_maths(rest):
        rest = _around_maths(rest)
    words = _TEXT_OR_WORD.sub(_as_text, rest)
    return words.strip().strip("$").strip() or None


def _as_text(m: re.Match) -> str:
    """A prose word as \\text{} (so that units drop); a \\text{} group as written."""
    word = m.group(0)
    return word if word.startswith("\\") or word.lower() in _MATH_WORDS else "\\text{" + word + "}"


def _prose(word: str) -> bool:
    word = word.rstrip(",;:")
    return len(word) > 1 and word.isalpha() and word.lower() not in _MATH_WORDS


def _around_maths(rest: str) -> str:
    """The words from the first to the last that hold maths, and a unit after them; nothing when
    a word dropped around them changes what they say ("not 3", "less than 5", "5 thousand",
    "all numbers except 5"), and "minus 5" / "negative 5" is -5."""
    words = rest.split()
    start = 0
    while start < len(words) and _prose(words[start]):
        start += 1
    end = len(words)
    while end > start and _prose(words[end - 1]):
        end -= 1
    unit = end < len(words) and (words[end].lower() in UNIT_WORDS or read_unit(words[end]) is not None)
    before = [w.rstrip(",;:.").lower() for w in words[:start]]
    after = [w.rstrip(",;:.").lower() for w in words[end + unit:]]
    sign = "-" if before[-1:] in (["minus"], ["negative"]) else ""
    # words before it that qualify it ("not 3", "less than 5", "all numbers except 5"), or after it that
    # scale it or take it back ("5 thousand", "12 or so"); not words that only say what it counts
    # ("15 more apples", "20 minutes less than before")
    if _QUALIFIERS & set(before) or TAIL_MEANINGS & set(after):
        return ""
    kept = words[start: end + unit]
    # "4, not 3" / "12 apples and not 13": what follows a denial is taken back, the value is before it
    denial = next((k for k, w in enumerate(kept) if k and _DENIAL.fullmatch(w.rstrip(",;:.").lower())), None)
    if denial is not None:
        kept = kept[:denial]
        while kept and kept[-1].rstrip(",;:").lower() in ("and", "but", "or", ""):
            kept = kept[:-1]
        kept[-1:] = [kept[-1].rstrip(",;:")] if kept else []
    return sign + " ".join(kept)


def _has_maths(text: str) -> bool:
    """A digit, `$` or a command outside \\text{...}."""
    return bool(_HAS_MATHS.search(_TEXT_BODY.sub(" ", text)))


def _answer_is(text: str, start: int = 0) -> str | None:
    matches = list(_ANSWER_IS.finditer(text, start))
    return _statement(text, matches[-1].end()) if matches else None


def _final(found: str | None) -> str | None:
    found = found.strip() if found else None
    # `\boxed{\ }` (a control space, its space stripped) is an empty box, as `\boxed{\,}` is
    if not found or len(found) > MAX_EXTRACTED_CHARS or found == "\\":
        return None
    return found


def _last_boxes(text: str, n: int) -> list[_Span]:
    """The last n boxes, outermost, in order."""
    spans: list[_Span] = []
    for span in _boxes_backwards(text):
        while spans and span.end > spans[-1].start:
            spans.pop()
        spans.append(span)
        if len(spans) == n:
            break
    return spans[::-1]


def _final_sentence(text: str) -> str:
    """The text after its last sentence break (". ", "! ", "? ", a line break) that is not
    inside maths: "... So we get $x = 4$." -> "So we get $x = 4$"."""
    tail = text[-4 * MAX_EXTRACTED_CHARS :].rstrip().rstrip(".!?").rstrip()
    maths = [(m.start(), m.end()) for m in _DISPLAY_OR_INLINE.finditer(tail)]
    start = 0
    for m in _SENTENCE_BREAK.finditer(tail):
        if not any(a < m.start() < b for a, b in maths):
            start = m.end()
    return tail[start:]


def _last_expression(text: str) -> str | None:
    """The last mathematical expression of the final sentence (as math-verify reads a
    response that neither boxes nor states its answer), or None when it holds none."""
    sentence = _final_sentence(text)
    formulas = [_Span(m.start(), m.end(), next(g for g in m.groups() if g)) for m in _DISPLAY_OR_INLINE.finditer(sentence)]
    if formulas:
        group = _affirmed_group(sentence, reversed(formulas))
        return _joined(sentence, group) if group else None
    plain = _TEXT_BODY.sub(" ", sentence)
    value = _sentence_value(sentence) if _HAS_PLAIN_MATHS.search(plain) else None
    return value if value and _HAS_PLAIN_MATHS.search(_TEXT_BODY.sub(" ", value)) else None


def extract_answer(text: str, parts: int = 1, unanchored: Unanchored = "no_answer") -> str | None:
    """A response's final answer (see the module docstring), or None.

    parts: how many parts the reference has. When the last group of boxes holds fewer,
    the last `parts` boxes are the answer, each a part ("the maximum is \\boxed{5} and
    the minimum is \\boxed{1}"). Only a check against a reference may pass it: a vote
    must not read the reference, even its shape.
    unanchored: what a response with neither a box nor an answer statement answers:
    "no_answer", or "last_expression" (the last mathematical expression of its final
    sentence)."""
    if unanchored not in ("no_answer", "last_expression"):
        raise ValueError(f"unanchored must be no_answer or last_expression, got {unanchored!r}")
    if not text:
        return None
    text = text[-MAX_TEXT_CHARS:]
    group = _affirmed_group(text, _boxes_backwards(text))
    if not group:
        stated = _answer_is(text)
        if stated is None and unanchored == "last_expression":
            stated = _last_expression(text)
        return _final(stated)
    after = [m for m in _FINAL_ANSWER.finditer(text, group[-1].end)]
    # "the final answer is consistent with step 3" speaks of the boxed answer, it states none:
    # after "is", a word (not maths) leaves the box the answer
    if after and not _COMMENT_AFTER_IS.match(text, after[-1].end()):
        stated = _answer_is(text, after[-1].start())
        if stated and _has_maths(stated):
            return _final(stated)
    if len(group) < parts:
        group = _last_boxes(text, parts)
    return _final(_joined(text, group))


def extract_reference(text: str) -> str | None:
    """A reference solution's answer: all its boxes (outermost), in order; without
    boxes, as extract_answer."""
    if not text:
        return None
    text = text[-MAX_TEXT_CHARS:]
    spans: list[_Span] = []
    for span in _boxes_backwards(text):
        while spans and span.end > spans[-1].start:  # an outer box holds the later ones
            spans.pop()
        spans.append(span)
    if not spans:
        return extract_answer(text)
    return _final(_joined(text, spans[::-1]))
