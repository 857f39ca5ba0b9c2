"""The screen's lexer reads code where Lean reads code: doc comments as Lean's
mkTokenAndFixPos and commentBody read them, literals and numbers as Basic.lean does, and
after a lexing error what Lean goes on to read. Checked by hand on worked cases, on every
corpus file, and by fuzzing against the reference transliterated from Lean's parser
(lean_lexer_ref.py) with seeded soups of comments, strings, char literals and tokens."""
import random
import re
import sys
from pathlib import Path

import pytest

from jury.verifiers.lean.lexer import LexError, is_id_first, iter_tokens, normalize_newlines
from jury.verifiers.lean.screen import extract_proof_file, screen_file

sys.path.insert(0, str(Path(__file__).parent))
import cases  # noqa: E402
from lean_lexer_ref import tokenize  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[2]))
from conftest import shared_dir  # noqa: E402


def view_of_screen(src):
    """(kind, start, end) of what the screen reads as words or literals: the code view."""
    kinds = {"ident": "word", "hashcmd": "word", "string": "string", "char": "char", "doc": "doc"}
    return [(kinds[t.kind], t.start, t.end) for t in iter_tokens(src) if t.kind in kinds and t.text != "_"]


def view_of_reference(src):
    """The same view of what Lean reads, errors and recovery included."""
    out = []
    for t in tokenize(src, recover=True):
        hash_word = t.text[:1] == "#" and is_id_first(t.text[1:2])
        if t.kind in ("ident", "keyword") and (is_id_first(src[t.start]) or src[t.start] == "«" or hash_word) \
                and t.text != "_":
            out.append(("word", t.start, t.end))
        elif t.kind in ("string", "char"):
            out.append((t.kind, t.start, t.end))
        elif t.kind in ("doc", "moddoc"):
            out.append(("doc", t.start, t.end))
    return out


def agree_or_refuse(src):
    """The screen reads what Lean reads, or refuses to lex (never a third way)."""
    try:
        mine = view_of_screen(src)
    except LexError:
        return "refused"
    theirs = view_of_reference(src)
    assert mine == theirs, (src, mine, theirs)
    return "agree"


# ---------------------------------------------------------------- doc comments, by hand
def docs(src):
    return [src[t.start:t.end] for t in iter_tokens(src) if t.kind == "doc"]


def test_a_line_comment_after_the_doc_opener_is_skipped_before_the_body():
    # mkTokenAndFixPos runs `whitespace` after `/--`: `-- -/` is a line comment, so the
    # doc comment ends at the next line's `-/`, and `y` is code
    src = "/-- -- -/\nx -/ y"
    assert docs(src) == ["/-- -- -/\nx -/"]
    assert [t.text for t in iter_tokens(src) if t.kind == "ident"] == ["y"]
    assert view_of_screen(src) == view_of_reference(src)


def test_a_comment_opener_inside_that_line_comment_does_not_nest():
    # the shape: a reader that counts the `/-` in the line comment sees one long
    # doc comment; Lean ends it at the first `-/` and runs the next line
    src = "/-- -- /-\n-/\nrun_cmd IO.println \"ran\"\n-- -/\ntheorem test_problem : True := trivial"
    assert docs(src) == ["/-- -- /-\n-/"]
    assert "run_cmd" in [t.text for t in iter_tokens(src)]
    assert "run_cmd" in (screen_file(src).reason or "")


@pytest.mark.parametrize("src,doc", [
    ("/--/ -- -/ v", "/--/ -- -/"),             # `/` is the body's first character, not a comment
    ("/---/ v", "/---/"),                       # `-/` right after the opener closes it
    ("/----x\n y -/ v", "/----x\n y -/"),       # `--` glued to the opener: a line comment
    ("/-- /- a -/ b -/ v", "/-- /- a -/ b -/"),  # a block comment after the opener is skipped whole
    ("/-- /-- a -/ b -/ v", "/-- /-- a -/ b -/"),  # `/--` there is no comment: the body nests from it
    ("/-! -- -/\n -/ v", "/-! -- -/\n -/"),      # module docs too
    ("/--\n  -- a\n  -- b\n  text -/ v", "/--\n  -- a\n  -- b\n  text -/"),
])
def test_doc_comment_boundaries_worked_from_lean(src, doc):
    assert docs(src) == [doc]
    assert agree_or_refuse(src) == "agree"


# ---------------------------------------------------------------- literals and numbers, by hand
@pytest.mark.parametrize("src,why", [
    ('"a\\\n  b"', "string gap"),             # absent from older Lean, one newline only in newer
    ('"a\\{b"', "escape"),                     # `\{` is an error outside interpolated strings
    ("0xrun_cmd", "malformed number"),         # Lean resumes after `0x`, at the keyword
    ("1_run_cmd", "malformed number"),
    ("1_000", "`_` in a number"),              # older Lean: `1` then the name `_000`
    ("h.1e5run_cmd", "field index or number"),  # a field index, or `1e5` then the keyword
    ('r#"a"b"#', "raw string"),                # older Lean: `r`, `#`, "a", then code
    ("+'a'", "quote glued"),                   # a token of some library's table could swallow the quote
    ("xérun_cmd", "Lean versions differ"),     # newer Lean: one name; older: `x`, an error, then the keyword
    ("aⱼrun_cmd", "Lean versions differ"),
])
def test_what_lean_reads_otherwise_is_refused(src, why):
    with pytest.raises(LexError, match=why):
        list(iter_tokens(src))


def test_mathlib_tokens_with_a_quote_as_lean_reads_them():
    """`''` (Set.image: Lean never reads two quotes as a char literal), `⁻¹'` (preimage), `∑'` and
    `∏'` (tsum, tprod) are Mathlib's tokens, the gate's header imports Mathlib: their quotes start no
    char literal. They were refused, and with them every statement about images, preimages or
    unconditional sums (outside audit)."""
    for src in ["f '' s", "(f '' s)", "f ⁻¹' {a}", "∑' n, f n", "∏' n : ℕ, f n", "∑'a'", "f ''s ∪ g '' t"]:
        assert agree_or_refuse(src) == "agree", src
    assert [(t.kind, t.text) for t in iter_tokens("∑'a'")] == [("symbol", "∑"), ("symbol", "'"), ("ident", "a'")]
    assert [(t.kind, t.text) for t in iter_tokens("f '' s")] == [("ident", "f"), ("symbol", "''"), ("ident", "s")]
    assert screen_file("theorem test_problem (f : ℕ → ℕ) (s : Set ℕ) : f '' s ⊆ Set.range f := by\n"
                       "  exact Set.image_subset_range f s").reason is None


def test_numbers_and_field_indices_as_lean_reads_them():
    def numbers(src):
        return [t.text for t in iter_tokens(src) if t.kind == "number"]
    assert numbers("h.1.elim x.2.1 0x1F 2.5e-3 7 2.") == ["1", "2", "1", "0x1F", "2.5e-3", "7", "2."]
    assert agree_or_refuse("h.1.elim (f x).2 hx.1.le") == "agree"


def test_lexer_mirrors_lean_identifiers():
    idents = [t.text for t in iter_tokens("λaxiom h₁' x.sorry 2x «a b».c _h") if t.kind == "ident"]
    # λ is not an identifier letter in Lean, numbers end at letters, dotted names are one
    # identifier (a keyword never has a dot), «» escapes are read through
    assert idents == ["axiom", "h₁'", "x.sorry", "x", "a b.c", "_h"]
    assert [t.text for t in iter_tokens("a := b") if t.kind == "symbol"] == [":="]
    assert [t.kind for t in iter_tokens("@[simp] #check")] == ["attr", "ident", "symbol", "hashcmd"]


def test_comments_hide_nothing_lean_would_read():
    assert [t.text for t in iter_tokens("-- x\ny /- z /- -/ -/ w")] == ["y", "w"]


# ---------------------------------------------------------------- agreement on real files
def corpus_files():
    root = shared_dir() / "data" / "lean-corpora"
    return sorted(root.rglob("*.lean")) if root.is_dir() else []


@pytest.mark.skipif(not corpus_files(), reason="no ../shared/data/lean-corpora")
def test_screen_and_lean_lexer_agree_on_every_corpus_file():
    outcomes = [agree_or_refuse(normalize_newlines(p.read_text())) for p in corpus_files()]
    assert len(outcomes) >= 200 and outcomes.count("agree") >= 150, outcomes.count("agree")


def test_screen_and_lean_lexer_agree_on_our_cases():
    outcomes = [agree_or_refuse(normalize_newlines(extract_proof_file(reply) or reply))
                for _, _, reply in cases.HONEST + cases.EXPLOITS]
    assert outcomes.count("agree") >= len(cases.HONEST), outcomes.count("agree")


# ---------------------------------------------------------------- fuzz: seeded soups
# Fragments that decide where comments, literals and tokens begin and end, the doc-comment
# opener's neighbourhood among them; words that would matter if they were code.
FRAGMENTS = ["/-", "-/", "--", "/--", "/-!", "-", "/", "\n", " ", "  ", '"', "'", "\\", "\\n", '\\"', "\\\n", "é",
             "{", "r\"", "r#\"", "\"#", "#", "«", "»", "''", "0x", "1", "0", "2.", "e5", "_", ".", "h", "x",
             "h'", "axiom", "run_cmd", "#eval", "#check", "by", "elim", "sorry", ":=", "<;>", "(", ")", ",",
             "⟨", "∑", "∏", "⁻¹", "!", "a.b", "'a'", "'\\n'"]


DOC_THEN_COMMENT = re.compile(r"/-[-!][ \n]*(--|/-)")


def soup_of_fragments(rng):
    return "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 14)))


def _unit(rng, depth=0):
    """A well-formed piece: a comment, a literal or a token, with soup inside."""
    inner = "".join(rng.choice(["x", " ", "\n", "-", "/", "--", "/-", "-/", "'", '"', "a", "#eval"])
                    for _ in range(rng.randint(0, 5)))
    kind = rng.randrange(10)
    if kind == 0:
        return "-- " + inner.replace("\n", " ") + "\n"
    if kind == 1 and depth < 2:
        return "/- " + _unit(rng, depth + 1) + " -/"
    if kind == 2:  # a doc comment, often with a comment right after its opener
        lead = rng.choice(["", " ", "-- " + inner.replace("\n", " ") + "\n", "/- x -/ ", "\n"])
        return rng.choice(["/--", "/-!"]) + lead + inner.replace("-/", "").replace("/-", "") + " -/"
    if kind == 3:
        return '"' + inner.replace('"', "").replace("\\", "") + '"'
    if kind == 4:
        return rng.choice(["'a'", "'\\''", "'\"'", "'-'", "'/'"])
    if kind == 5:
        return rng.choice(["1", "2.5", "0x1f", "3e2", "h.1", "x.2.elim", "10"])
    return rng.choice(["theorem", "x", "run_cmd", "#check", "h₁", "«a b»", ":=", "(", ")", "<;>", ",", "by"])


def soup_of_units(rng):
    return "".join(_unit(rng) + rng.choice([" ", "\n", "", "  "]) for _ in range(rng.randint(1, 8)))


@pytest.mark.parametrize("generator,seed,soups,agreeing,docs_first", [
    (soup_of_fragments, 0, 30_000, 6000, 15), (soup_of_units, 1, 8000, 5000, 500)])
def test_fuzz_screen_against_lean_lexer(generator, seed, soups, agreeing, docs_first):
    rng = random.Random(seed)
    seen = {"agree": 0, "refused": 0}
    doc_after_comment = 0
    for _ in range(soups):
        src = generator(rng)
        outcome = agree_or_refuse(src)
        seen[outcome] += 1
        doc_after_comment += outcome == "agree" and DOC_THEN_COMMENT.search(src) is not None
    # not vacuous: most soups are compared, the doc-comment shape among them
    assert seen["agree"] >= agreeing and doc_after_comment >= docs_first, (seen, doc_after_comment)
