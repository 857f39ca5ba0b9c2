"""Screening untrusted Lean text before it reaches Lean, and cutting it out of LLM replies.

Proofs come from a policy-adjacent LLM, so they are adversarial input. A whole proof file
(helpers, namespaces, the target theorem) is screened in two stages:

  1. lexer.py reads it as Lean 4's parser does (comments, doc comments, literals, numbers),
     or refuses what Lean would read otherwise or what Lean versions read differently;
  2. the walk below reads the tokens against commands.py's tables: every command word must
     be on the allowlist (with its own rules: options, attributes, `local`, scopes,
     declared names), words that change the verdict (`sorry`, `native_decide`, the
     verifier's reference axiom) are refused with their reasons, `namespace`/`section`/
     `mutual` and `end` must balance, and the file must declare exactly one theorem named
     `test_problem`, whose full name the checker needs.

Which words head commands is known from commands.py and, when the checker could ask Lean,
from the header environment (`environment`: the first tokens of its command parsers), so
a library command that nobody listed is refused as well. A refusal only costs recall; a
miss would cost soundness, and the checker's Lean-side layers (axioms, elaborated type,
kernel replay) stand behind it.

    reason = screen(signature)            # None when clean (no commands at all), else why
    fs = screen_file(text)                # fs.reason: None when clean; fs.target: "Ns.test_problem"
    fs = screen_file(text, environment=frozenset({"lib_cmd", ...}))
    statement = extract_statement(reply)  # "theorem test_problem <signature>" or None
    proof = extract_proof_file(reply)     # the Lean block declaring test_problem, or None
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from jury.verifiers.lean.commands import (ALLOWED_ATTRS, ALLOWED_COMMANDS, ALLOWED_OPTION_FAMILIES, ALLOWED_OPTIONS,
                                          DECLARATIONS, REF_NAME, REFUSED, TERM_WORDS, THEOREM_NAME, refusal)
from jury.verifiers.lean.lexer import (CLOSERS, OPENERS, HashCommandError, LexError, Token, check_characters, iter_tokens,
                                       normalize_newlines)

__all__ = ["THEOREM_NAME", "REF_NAME", "SECTION", "FileScreen", "LexError", "screen", "screen_file", "iter_tokens",
           "normalize_newlines", "lean_blocks", "assign_offset", "extract_statement", "signature_of",
           "extract_proof_file", "extract_proof_body", "strip_header_imports", "normalized"]

SECTION = "jury_submission"      # the section the checker wraps a submission in
MAX_TEXT_CHARS = 64_000
# A global instance (or an erased one) outlives the checker's `end` of the section around the file,
# so the checker's own commands after it would be elaborated with it: a coercion from the statement
# to True made its `example : @ref = @target := rfl` hold, and a BEq Expr answering true its kernel
# check (found by an outside audit, by reading Lean's elaborator; no Lean here to run it)
_GLOBAL_INSTANCE = ("a global instance outlives the file and would change how the verifier's own checks after "
                    "it elaborate; write `local instance` (or `attribute [local instance]`, `haveI` in a proof)")
# Names Lean generates (bar.match_1, bar._sunfold, f._unsafe_rec, _private...): a proof has
# no business naming or declaring them, and LeanParanoia's AuxiliaryShadowing files do. An
# undotted `_h` is a binder the author marks unused, and stays allowed.
_AUXILIARY = re.compile(r"_(?!root_$).+|match_\d+|proof_\d+")
_AUXILIARY_UNDOTTED = re.compile(r"match_\d+|proof_\d+")


@dataclass(frozen=True)
class FileScreen:
    reason: str | None        # None when the file may go to Lean
    target: str | None = None  # the target theorem's full name, as Lean syntax
    # the `end` lines that close the sections and namespaces the file leaves open (Lean closes them
    # at the end of a file; the checker's own `end` of its section around the file needs them closed)
    closers: str = ""


def _prepare(text: str) -> list[Token]:
    if not text.strip():
        raise LexError("empty")
    if len(text) > MAX_TEXT_CHARS:
        raise LexError(f"longer than {MAX_TEXT_CHARS} characters")
    check_characters(text)
    try:
        return list(iter_tokens(text))
    except HashCommandError as e:
        raise LexError(f"`{e.word}` at offset {e.offset}: {refusal(e.word)}") from None


def _name_reason(tok: Token, environment: frozenset[str]) -> str | None:
    """Why an identifier or `#` word may not stand here; None for a plain name."""
    parts = tok.text.split(".")
    if len(parts) == 1 or tok.kind == "hashcmd":
        why = refusal(tok.text, environment)
        if why:
            return f"`{tok.text}` at offset {tok.start}: {why}"
        if _AUXILIARY_UNDOTTED.fullmatch(tok.text):
            return f"`{tok.text}` at offset {tok.start}: a name Lean generates for its own auxiliaries"
        return None
    bad = next((p for p in parts if p in TERM_WORDS), None)
    if bad:
        return f"`{tok.text}` at offset {tok.start}: {REFUSED[bad]}"
    bad = next((p for p in parts if _AUXILIARY.fullmatch(p)), None)
    if bad:
        return f"`{tok.text}` at offset {tok.start}: `{bad}` is a name Lean generates for its own auxiliaries"
    return None


def screen(text: str, environment: frozenset[str] = frozenset()) -> str | None:
    """Why a signature (or a bare proof term) may not be sent to Lean; None when clean.

    Stricter than the file screen: no command word at all (allowed ones included), no
    attribute or doc comment, balanced brackets, so the text cannot end the declaration
    the verifier writes around it.
    """
    try:
        tokens = _prepare(text)
    except LexError as e:
        return str(e)
    depth = 0
    for tok in tokens:
        if tok.kind in ("ident", "hashcmd"):
            reason = _name_reason(tok, environment)
            if reason:
                return reason
            if tok.text in ALLOWED_COMMANDS:
                return f"`{tok.text}` at offset {tok.start}: a command, and this text must be a term"
        if tok.kind == "attr" or tok.kind == "doc":
            return f"`{tok.text[:3]}` at offset {tok.start}: an attribute or doc comment, and this text must be a term"
        if tok.kind == "symbol" and tok.text in "([{⟨⦃⟦⁅" + ")]}⟩⦄⟧⁆":
            depth += 1 if tok.text in OPENERS else -1
            if depth < 0:
                return f"unbalanced `{tok.text}` at offset {tok.start}"
    return "unbalanced brackets" if depth else None


class _FileWalk:
    """The file screen's state: scopes, the target, where attributes and options are."""

    def __init__(self, tokens: list[Token], text: str, environment: frozenset[str]):
        self.toks, self.text, self.environment = tokens, text, environment
        self.scopes: list[tuple[str, str, str]] = []  # (namespace | section | mutual, name, name as written)
        self.targets: list[str] = []

    def at(self, k: int) -> Token | None:
        return self.toks[k] if k < len(self.toks) else None

    def next_ident(self, k: int) -> Token | None:
        nxt = self.at(k + 1)
        return nxt if nxt is not None and nxt.kind == "ident" else None

    def same_line(self, a: Token, b: Token) -> bool:
        return "\n" not in self.text[a.end:b.start]

    def run(self) -> FileScreen:
        k = 0
        while k < len(self.toks):
            tok = self.toks[k]
            if tok.kind == "attr":
                k, reason = self.attributes(k + 1, tok)
            elif tok.kind == "ident" and tok.text == "attribute":
                nxt = self.at(k + 1)
                if nxt is None or nxt.text != "[":
                    return FileScreen(f"`attribute` without `[` at offset {tok.start}")
                k, reason = self.attributes(k + 2, tok)
            elif tok.kind in ("ident", "hashcmd"):
                reason = _name_reason(tok, self.environment) or self.command(k)
                k += 1
            else:
                k, reason = k + 1, None
            if reason:
                return FileScreen(reason)
        if any(kind == "mutual" for kind, _, _ in self.scopes):
            return FileScreen("a mutual block is never closed")
        if len(self.targets) != 1:
            return FileScreen(f"{len(self.targets)} theorems named {THEOREM_NAME} (exactly one is needed)")
        # `noncomputable section` with no `end`, as Mathlib files often have it: closed for the checker
        closers = "\n".join(f"end {written}".rstrip() for _, _, written in reversed(self.scopes))
        return FileScreen(None, self.targets[0], closers)

    def attributes(self, k: int, opener: Token) -> tuple[int, str | None]:
        """From the first token inside `@[` or `attribute [` to after its `]`: each attribute
        `[local | scoped] [-] name args...` has its name on the allowlist; args are names,
        numbers and arrows."""
        expect_name, kind = True, ""
        while k < len(self.toks) and self.toks[k].text != "]":
            t = self.toks[k]
            if expect_name and t.kind == "ident" and t.text in ("local", "scoped") or expect_name and t.text == "-":
                kind += t.text  # the attribute's kind, or `-simp` erasing one
            elif expect_name:
                if t.kind != "ident" or t.text not in ALLOWED_ATTRS:
                    why = REFUSED.get(t.text, "it attaches code, registers meta code or changes elaboration")
                    return k, f"attribute `{t.text}` at offset {t.start}: not on the allowlist ({why})"
                if t.text == "instance" and kind not in ("local", "scoped"):
                    return k, f"attribute `{kind}instance` at offset {t.start}: {_GLOBAL_INSTANCE}"
                expect_name = False
            elif t.text == ",":
                expect_name, kind = True, ""
            elif t.kind == "ident":
                reason = _name_reason(t, self.environment)
                if reason:
                    return k, reason
            elif t.kind != "number" and t.text not in ("←", "↓", "↑", "-"):
                return k, f"`{t.text}` in an attribute at offset {t.start}"
            k += 1
        return k + 1, None if k < len(self.toks) else f"unclosed attribute at offset {opener.start}"

    def command(self, k: int) -> str | None:
        """The rules of the allowed command at k, if the word there is one."""
        tok = self.toks[k]
        word, nxt = tok.text, self.next_ident(k)
        if tok.kind == "hashcmd":
            after = self.at(k + 1)
            # a word glued to a symbol may be the start of a longer token of Lean's table
            if after is not None and after.start == tok.end and after.kind == "symbol":
                return f"`{word}` glued to `{after.text}` at offset {tok.start}"
            return None
        if word == "set_option":
            if nxt is None:
                return f"`set_option` without an option at offset {tok.start}"
            if nxt.text not in ALLOWED_OPTIONS and not nxt.text.startswith(ALLOWED_OPTION_FAMILIES):
                return f"option `{nxt.text}` at offset {nxt.start}: not on the allowlist (it may switch off a check)"
        elif word == "open" and nxt is not None and nxt.text == "private":
            return f"`open private` at offset {tok.start}: {REFUSED['open_private']}"
        elif word in ("local", "scoped"):
            before = self.at(k - 1)
            if before is not None and before.text == "open" and word == "scoped":
                return None  # `open scoped X`
            if nxt is None or nxt.text != "instance":
                return (f"`{word}` at offset {tok.start}: only before `instance` or inside an attribute list "
                        "(before notation, macros or syntax it declares syntax)")
        elif word == "instance":
            before = self.at(k - 1)
            if before is None or before.text not in ("local", "scoped"):
                return f"`instance` at offset {tok.start}: {_GLOBAL_INSTANCE}"
            return self.declaration(k)
        elif word == "deriving" and nxt is not None and nxt.text == "instance":
            return (f"`deriving instance` at offset {tok.start}: derives instances for a type declared elsewhere; "
                    "no proof needs it")
        elif word in ("namespace", "section", "mutual"):
            return self.open_scope(k)
        elif word == "end":
            return self.end(k)
        elif word in DECLARATIONS:
            return self.declaration(k)
        return None

    def open_scope(self, k: int) -> str | None:
        tok, nxt = self.toks[k], self.next_ident(k)
        if tok.text == "mutual":
            self.scopes.append(("mutual", "", ""))
            return None
        named = nxt is not None and nxt.text not in ALLOWED_COMMANDS and self.same_line(tok, nxt)
        if tok.text == "namespace" and not named:
            return f"`namespace` without a name at offset {tok.start}"
        if named and any(_AUXILIARY.fullmatch(p) for p in nxt.text.split(".")):
            return f"namespace `{nxt.text}` at offset {nxt.start}: a name Lean generates for its own auxiliaries"
        self.scopes.append((tok.text, nxt.text if named else "", self.text[nxt.start:nxt.end] if named else ""))
        return None

    def end(self, k: int) -> str | None:
        tok, nxt = self.toks[k], self.next_ident(k)
        name = nxt.text if nxt is not None and nxt.text not in ALLOWED_COMMANDS and self.same_line(tok, nxt) else ""
        if nxt is not None and not name and nxt.text not in ALLOWED_COMMANDS:
            return f"`end` followed by `{nxt.text}` on another line at offset {tok.start}"
        if not self.scopes:
            return f"`end` with no open namespace, section or mutual block at offset {tok.start}"
        if self.scopes[-1][1] != name:
            kind, open_name, _ = self.scopes[-1]
            return f"`end {name}` closes {kind} {open_name or '(anonymous)'} at offset {tok.start}"
        self.scopes.pop()
        return None

    def declaration(self, k: int) -> str | None:
        tok, nxt = self.toks[k], self.next_ident(k)
        if tok.text == "example":
            return None
        if nxt is None:  # `instance : C` and `class inductive` name nothing here
            return None if tok.text in ("instance", "class") else f"`{tok.text}` without a name at offset {tok.start}"
        raw = self.text[nxt.start:nxt.end]
        prefix = "".join(written + "." for kind, _, written in self.scopes if kind == "namespace")
        full = raw[len("_root_."):] if raw.startswith("_root_.") else prefix + raw
        aux = next((p for p in nxt.text.split(".") + prefix.split(".") if _AUXILIARY.fullmatch(p)), None)
        if aux:
            return f"declares `{full}` at offset {nxt.start}: `{aux}` is a name Lean generates for its own auxiliaries"
        if nxt.text.split(".")[-1] != THEOREM_NAME:
            return None
        if tok.text not in ("theorem", "lemma"):
            return f"`{tok.text} {nxt.text}`: the target must be a theorem (offset {tok.start})"
        before = self.at(k - 1)
        if before is not None and before.kind == "ident" and before.text in ("private", "protected"):
            return f"`{before.text}` target at offset {before.start}"
        self.targets.append(full)
        return None


def screen_file(text: str, environment: frozenset[str] = frozenset()) -> FileScreen:
    """Screen a whole proof file (header imports already removed); see the module doc.
    `environment`: the header environment's command words, when Lean could be asked."""
    try:
        tokens = _prepare(text)
    except LexError as e:
        return FileScreen(str(e))
    return _FileWalk(tokens, text, environment).run()


# ---------------------------------------------------------------- cutting Lean out of replies
_DECL = re.compile(r"\b(?:theorem|lemma)\s+(?:[\w'.«»]+\.)?" + THEOREM_NAME + r"(?![\w'!?.])")


def lean_blocks(reply: str) -> list[str]:
    """Fenced blocks tagged lean, lean4 or nothing, by fence lines (a regex pairs the closing
    fence of one block with the opening of the next). An unclosed block was cut off: dropped."""
    blocks: list[str] = []
    current: list[str] | None = None
    tag = ""
    for line in normalize_newlines(reply).split("\n"):
        fence = line.strip().startswith("```")
        if current is None and fence:
            current, tag = [], line.strip()[3:].strip().lower()
        elif fence:
            if tag in ("", "lean", "lean4"):
                blocks.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def _decl_block(reply: str) -> str | None:
    """The last Lean block that declares test_problem (models restate drafts first)."""
    blocks = [b for b in lean_blocks(reply) if _DECL.search(b)]
    return blocks[-1] if blocks else None


def assign_offset(text: str, start: int = 0) -> int | None:
    """Offset just after the first `:=` at bracket depth 0 from start; None if there is none."""
    depth = 0
    try:
        for tok in iter_tokens(text[start:]):
            if tok.text in OPENERS:
                depth += 1
            elif tok.text in CLOSERS:
                depth = max(0, depth - 1)
            elif tok.text == ":=" and depth == 0:
                return start + tok.end
    except LexError:
        return None
    return None


def extract_statement(reply: str) -> str | None:
    """`theorem test_problem <signature>` from an autoformalizer reply, screened; else None.

    Only the declaration itself is kept: header lines are the verifier's, and any proof
    the formalizer attached (usually `by sorry`) is dropped.
    """
    block = _decl_block(reply)
    if block is None:
        return None
    m = _DECL.search(block)
    cut = assign_offset(block, m.end())
    signature = (block[m.end():cut - 2] if cut is not None else block[m.end():]).strip()
    if not signature or screen(signature) is not None:
        return None
    # a trailing comment ("... = 4 -- answer 4") would comment out the ` := by` the prompts and the
    # checker write after the statement: the signature ends with its last token
    last = None
    for last in iter_tokens(signature):
        pass
    return f"theorem {THEOREM_NAME} {signature[:last.end]}" if last is not None else None


def signature_of(statement: str) -> str:
    """The part of a statement after `theorem test_problem`, with its leading space."""
    prefix = f"theorem {THEOREM_NAME}"
    if not statement.startswith(prefix + " "):
        raise ValueError(f"not a verifier-written statement: {statement[:80]!r}")
    return statement[len(prefix):]


def extract_proof_file(reply: str) -> str | None:
    """The last Lean block declaring test_problem, newlines normalised; else None.

    The whole file is kept (helpers before and after, namespaces): the checker screens
    it, drops the imports the header already has and judges the target theorem.
    """
    block = _decl_block(reply)
    return None if block is None or not block.strip() else block


def extract_proof_body(reply: str) -> str | None:
    """What a prover wrote after its test_problem statement's `:=`, verbatim; else None."""
    block = _decl_block(reply)
    if block is None:
        return None
    for m in _DECL.finditer(block):
        cut = assign_offset(block, m.end())
        if cut is not None:
            body = block[cut:].rstrip()
            return body if body.strip() else None
    return None


def strip_header_imports(text: str, header: str) -> str:
    """text without the `import` lines the header covers: its own modules and their
    submodules (`import Mathlib.Tactic` under `import Mathlib`, which imports every Mathlib
    module), so they add nothing; Lean takes imports only at the top of the file anyway.
    Any other import stays, for the screen to refuse."""
    have = [ln.split()[1] for ln in header.split("\n") if ln.split()[:1] == ["import"] and len(ln.split()) == 2]

    def covered(line: str) -> bool:
        words = line.split("--")[0].split()
        return len(words) == 2 and words[0] == "import" and any(words[1] == m or words[1].startswith(m + ".")
                                                                for m in have)
    return "\n".join("" if covered(ln) else ln for ln in text.split("\n"))


def normalized(text: str) -> str:
    """Whitespace-insensitive form, to spot duplicate candidates."""
    return " ".join(text.split())
