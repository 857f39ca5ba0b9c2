#!/usr/bin/env python3
"""A stand-in for the Lean REPL (leanprover-community/repl) that speaks its exact protocol.

Framing, as REPL/Main.lean does it: read stdin lines until an empty one (each line's
trailing whitespace dropped, the lines joined); end of input ends the program; a query
starting with `#` or `--` is skipped; JSON that does not parse is fatal (the REPL throws).
Each reply is a JSON object spread over several lines (Lean pretty-prints), then a blank
line. Replies: {"env": n, "messages": [...], "sorries": [...]}, empty lists omitted, env
numbers counting up from 0 per process; {"message": "Unknown environment."} for a bad env.
An env snapshot holds what Lean's would: the declarations, the open scopes
(namespace/section/mutual) and the scoped options, so a later command continues from them.

What it "elaborates" follows simple rules instead of Lean. Comments are removed as Lean's
lexer does (lean_lexer_ref). A command is cut into commands at lines starting with a
command keyword (after attributes and modifiers); `set_option ... in` and `open ... in`
prefixes apply to the command after them. namespace/section/end nest and must match, as
in Lean; declarations get the namespace's prefix. A theorem/lemma/example `NAME SIG :=
BODY` (or `NAME SIG | alt ...`, equation style):
  - BODY contains `DOUBLE_HANG`: spawn a `sleep` child (its pid written to the file named
    by $LEAN_DOUBLE_CHILD_PID_FILE) and never answer, like a runaway tactic;
  - `DOUBLE_CRASH`: print a panic to stderr and exit 134, like a Lean abort;
  - `DOUBLE_ALLOC`: allocate 4 GiB; under RLIMIT_AS that fails and the process exits 137;
  - `DOUBLE_KERNEL_REJECTS`: elaborates, but the kernel rejects it: an error, unless
    `debug.skipKernelTC` is set, when it is added and only a kernel replay finds it;
  - `sleep N`: sleep N milliseconds first, as Lean's `sleep` tactic does, then go on;
  (an `axiom`'s signature holding one of the first three does the same: a statement that hangs or
  crashes Lean while it elaborates, as the gate's statement check meets it)
  - `sorry`: a "declaration uses 'sorry'" warning at NAME, a sorries entry with its goal,
    and sorryAx among the axioms (sorryAx too, silently, under debug.byAsSorry and kin);
  - `exact X`, `apply X` or a term proof headed by X, where X is unknown (not declared, not
    a library name in LIBRARY or a dotted name, not bound elsewhere in the signature or
    body): error "unknown identifier 'X'";
  - no known closing tactic in a `by` block: error "unsolved goals";
  - a false goal (conclusion `False`, or closed numerals that evaluate false, elaborated
    with no local instance or notation in scope) is closed only by naming a declared
    constant (an axiom, or a theorem proved by such means): else "unsolved goals";
  - otherwise proved. Axioms: none for a bare `rfl`/`decide`, else propext,
    Classical.choice, Quot.sound; plus Lean.ofReduceBool for `native_decide`; plus those
    of every declared constant the body names (an `axiom` brings itself).
def/abbrev/instance/structure/class/inductive/opaque are recorded with their kind; an
opaque's value brings its axioms. What a scope adds to elaboration (a local instance, a local
instance attribute, notation, macros, a `variable`) lasts until its `end`; a variable counts
for a declaration whose signature names it (or after `include`), as in Lean 4. A signature containing `ill_typed` fails to elaborate
("type mismatch"). A declaration's elaborated type is its signature (its text
as Lean tokens) plus the local instances, notations and variables in scope when it was
elaborated. `#print axioms NAME` answers as Lean 4 does: "'NAME' depends on axioms: [a,
b]" or "'NAME' does not depend on any axioms" (info). `example : @A = @B := rfl` passes
when A and B have the same elaborated type, else "type mismatch". The verifier's own
kernel-check command (check.KERNEL_CHECK, recognised by its `jury-check` marker) is
answered as the real one would: kind, elaborated type, a unique target, and a kernel
replay that fails on declarations the kernel never checked; its command-table query
(check.COMMAND_TABLE, marker `jury-commands`) with COMMAND_TABLE below, which holds
`lib_exec`, a command of a library no list of the screen's knows: it stands for the ones
nobody listed, and runs ("lib_exec: ran", an info). `#check`, `#reduce`, `#synth` and
`#print` (other than axioms) answer with an info. `#whoami` (not in Lean)
reports uid, pid and network interfaces, for sandbox tests. A repeated name is "'NAME'
has already been declared"; `import` with an env is an error, as in Lean; anything else
is "unexpected token".
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lean_lexer_ref import LeanLexError, strip_comments, tokenize  # noqa: E402

STANDARD_AXIOMS = ["propext", "Classical.choice", "Quot.sound"]
TACTICS = re.compile(r"(?<![\w.])(norm_num|linarith|nlinarith|simp|simp_all|simpa|omega|decide|rfl|ring|ring_nf|"
                     r"positivity|aesop|exact|native_decide|grind|use|assumption|trivial|tauto|field_simp|"
                     r"norm_cast|exact_mod_cast|contradiction|rw|rwa|apply|linear_combination|bound)(?![\w'])")
# Unqualified library names the double knows (Mathlib's, in the real REPL).
LIBRARY = frozenset("""rfl trivial id absurd sq_nonneg sq_abs abs_nonneg mul_pos div_self dvd_add dvd_mul_right
dvd_mul_left le_refl lt_irrefl zero_add add_zero mul_one one_mul mul_comm add_comm mul_self_nonneg True False
And Or Not Eq Nat Int Real em""".split())  # `em`: what the corpora's `open Classical` brings
NOT_NAMES = frozenset("fun by show from if match let have calc this λ".split())
COMMAND = re.compile(r"^(?:@\[[^\]]*\]\s*)*(?:(?:private|protected|noncomputable|partial|unsafe|nonrec|local|scoped)\s+)*"
                     r"(theorem|lemma|def|abbrev|example|instance|structure|class|inductive|axiom|opaque|namespace|"
                     r"section|end|open|set_option|universe|variable|include|omit|import|attribute|mutual|prelude|"
                     r"macro|macro_rules|syntax|elab|notation|infix|infixl|infixr|#print|#check|#check_failure|"
                     r"#reduce|#synth|#simp|#norm_num|#whnf|#eval|#whoami|#exit|lib_exec|export)"
                     r"(?![\w'])", re.M)
MODIFIERS = re.compile(r"^(?:@\[[^\]]*\]\s*)*((?:(?:private|protected|noncomputable|partial|unsafe|nonrec|local|"
                       r"scoped)\s+)*)")
PREFIX_IN = re.compile(r"^(set_option\s+([\w.]+)\s+(\S+)|open\s+[^\n]*?)\s+in\b\s*", re.S)
DECL = re.compile(r"(theorem|lemma|example)\s*([^\s(:{\[⦃]*)(.*)", re.S)
AXIOM = re.compile(r"axiom\s+([^\s(:{\[]+)(.*)", re.S)
COMPARE = re.compile(r"example\s*:\s*@([\w.']+)\s*=\s*@([\w.']+)\s*:=\s*rfl\s*$", re.S)
CHECK_TARGET = re.compile(r"env\.find\? `([^\s|]+) \| throwError \"jury-check: no target")
SORRY_OPTIONS = ("debug.byAsSorry", "debug.proofAsSorry", "debug.terminalTacticsAsSorry")
INSPECT = ("#check", "#check_failure", "#reduce", "#synth", "#simp", "#norm_num", "#whnf")
# The first tokens of the command parsers of the environment the double stands for: core
# Lean's and Mathlib's (some), `lib_exec` from a library nobody listed, and the token kinds
# Lean keys some parsers by.
COMMAND_TABLE = """theorem lemma def abbrev example instance structure class inductive axiom opaque namespace
section end open export set_option universe variable include omit attribute mutual deriving noncomputable private
protected partial unsafe nonrec local scoped macro macro_rules syntax elab elab_rules notation notation3 infix infixl
infixr prefix postfix initialize builtin_initialize run_cmd run_elab run_meta declare_syntax_cat #eval #print
#check #check_failure #reduce #exit #synth #guard_msgs #help #lint #simp #norm_num #whnf irreducible_def alias
assert_not_exists library_note proof_wanted recall unif_hint binder_predicate add_decl_doc suppress_compilation
seal unseal lib_exec ident num str""".split()


def position(cmd, offset):
    line = cmd.count("\n", 0, offset) + 1
    return {"line": line, "column": offset - (cmd.rfind("\n", 0, offset) + 1)}


class Env:
    """One snapshot: declarations, open scopes, scoped options and what is in scope."""

    def __init__(self, decls=None, scopes=None, options=None, context=(), marks=()):
        self.decls = dict(decls or {})      # full name -> dict(kind, sig, ctx, axioms, kernel_bad)
        self.scopes = list(scopes or [])    # [("namespace"|"section"|"mutual", name)]
        self.options = dict(options or {})
        self.context = tuple(context)       # local instances / notations / variables in scope
        self.marks = list(marks)            # len(context) when each open scope began

    def copy(self):
        return Env(self.decls, self.scopes, self.options, self.context, self.marks)

    def prefix(self):
        return "".join(name + "." for kind, name in self.scopes if kind == "namespace" and name)

    def resolve(self, name):
        if name.startswith("_root_."):
            return name[7:] if name[7:] in self.decls else None
        spaces = [self.prefix()[:i] for i in range(len(self.prefix()), -1, -1) if i == 0 or self.prefix()[i - 1] == "."]
        for ns in spaces:
            if ns + name in self.decls:
                return ns + name
        return next((n for n in self.decls if n.endswith("." + name) or n == name), None)


class Run:
    """Elaborating one REPL command: its messages and sorries."""

    def __init__(self, cmd, env, has_env):
        self.cmd, self.env, self.has_env = cmd, env, has_env
        self.messages, self.sorries = [], []

    def msg(self, start, end, severity, data):
        self.messages.append({"severity": severity, "pos": position(self.cmd, start),
                              "endPos": position(self.cmd, end), "data": data})

    # ---------------------------------------------------------------- commands
    def command(self, start, text, options):
        end = start + len(text.rstrip())
        m = PREFIX_IN.match(text)
        if m:
            opts = dict(options)
            if m.group(2):
                opts[m.group(2)] = m.group(3)
            return self.command(start + m.end(), text[m.end():], opts)
        mods = MODIFIERS.match(text)
        modifiers = mods.group(1).split()
        body = text[mods.end():]
        word = body.split(None, 1)[0] if body.split() else ""
        at = start + mods.end()
        if word == "import":
            if self.has_env:
                self.msg(start, end, "error", "invalid 'import' command, it must be used in the beginning of the file")
            elif any(ln.strip() and not ln.startswith("import ") for ln in text.splitlines()):
                self.msg(start, end, "error", "unexpected token; expected command")
        elif word in ("namespace", "section", "end", "mutual"):
            first = body.split("\n")[0].split()  # a scope's name is on its own line (checkColGt)
            self.scope(word, first[1] if len(first) > 1 and word != "mutual" else "", start, end)
        elif word == "set_option":
            parts = body.split()
            self.env.options[parts[1]] = parts[2] if len(parts) > 2 else ""
        elif word in ("open", "universe", "omit", "export"):
            pass
        elif word == "include":
            self.env.context += ("include",)
        elif word == "variable":
            for group in binder_groups(body[len("variable"):]):
                head = top_level_split(group[1:-1], ":")
                # `[Fact p]`: an anonymous instance binder is always included (*)
                names = head[0].split() if len(head) > 1 else ["*"]
                self.env.context += ("variable:" + ",".join(names) + "|" + group,)
        elif word in ("notation", "infix", "infixl", "infixr", "macro", "macro_rules", "syntax", "elab") \
                or ("local" in modifiers or "scoped" in modifiers):
            self.env.context += (word,)
            if word == "instance":
                self.record(body, at, "instance", options)
        elif word == "attribute":
            if re.search(r"\b(?:local|scoped)\s+instance\b", body):
                self.env.context += ("attribute",)
        elif word in ("theorem", "lemma", "example"):
            self.theorem(at, body, options)
        elif word == "axiom" and AXIOM.match(body):
            m = AXIOM.match(body)
            self.side_effects(m.group(2))  # a signature that hangs or crashes Lean while it elaborates
            name = self.env.prefix() + m.group(1)
            if not self.ill_typed(at + m.start(2), m.group(2)):
                self.env.decls[name] = self.decl("axiom", m.group(2), {name})
        elif word in ("def", "abbrev", "instance", "structure", "class", "inductive", "opaque"):
            self.record(body, at, word, options)
        elif word == "#print" and body.split()[1:2] == ["axioms"]:
            self.print_axioms(body.split()[2], start, end)
        elif word == "#eval" and "jury-check" in body:
            self.jury_check(body, start, end)
        elif word == "#eval" and "jury-commands" in body:
            self.msg(start, end, "info", "jury-commands: " + " ".join(COMMAND_TABLE))
        elif word == "lib_exec":
            self.msg(start, end, "info", "lib_exec: ran")
        elif word in INSPECT or word == "#print":
            self.msg(start, end, "info", " ".join(body.split()[1:]))
        elif word == "#whoami":
            names = [n for _, n in socket.if_nameindex()]
            self.msg(start, end, "info", f"uid={os.getuid()} pid={os.getpid()} interfaces={','.join(names)}")
        else:
            self.msg(start, end, "error", "unexpected token; expected command")

    def scope(self, word, name, start, end):
        if word != "end":
            self.env.scopes.append((word, name))
            self.env.marks.append(len(self.env.context))
            return
        if not self.env.scopes:
            self.msg(start, end, "error", "invalid 'end', insufficient scopes")
        elif self.env.scopes[-1][1] != name:
            self.msg(start, end, "error", f"invalid 'end', name mismatch (expected {self.env.scopes[-1][1] or 'nothing'})")
        else:
            self.env.scopes.pop()
            self.env.context = self.env.context[:self.env.marks.pop()]  # what the scope added ends with it

    def decl(self, kind, sig, axioms, kernel_bad=False):
        ctx, binders = self.in_scope(sig)
        return {"kind": kind, "sig": token_texts(f"{binders} {sig}" if binders else sig), "ctx": ctx,
                "axioms": set(axioms), "kernel_bad": kernel_bad}

    def in_scope(self, sig):
        """(what the scopes add to elaborating a declaration with this signature, the variable
        binders it gets): a variable when the signature names it, an anonymous instance binder,
        or anything after `include`, as Lean 4 includes them."""
        words = set(re.findall(r"[\w'₀-₉]+", sig))
        included = "include" in self.env.context
        ctx, binders = [], []
        for c in self.env.context:
            if c.startswith("variable:"):
                names, binder = c[len("variable:"):].split("|", 1)
                if included or "*" in names.split(",") or words & set(names.split(",")):
                    binders.append(binder)
            elif c != "include":
                ctx.append(c)
        return tuple(ctx), " ".join(binders)

    def record(self, body, at, kind, options):
        """def, abbrev, instance, structure, class, inductive, opaque: name, kind, axioms."""
        m = re.match(r"\w+\s+([^\s(:{\[⦃]+)?(.*?)(?::=|\bwhere\b|$)(.*)", body, re.S)
        name = self.env.prefix() + (m.group(1) or f"inst{len(self.env.decls)}")
        if name in self.env.decls:
            self.msg(at, at + len(body.rstrip()), "error", f"'{name}' has already been declared")
            return
        if kind == "inductive" and m.group(1) and re.search(r"\(\s*" + re.escape(m.group(1)) + r"\s*→", body):
            self.msg(at, at + len(body.rstrip()), "error", f"(kernel) arg #1 of '{name}.mk' has a non positive "
                     "occurrence of the datatypes being declared")
            return
        axioms = self.used_axioms(m.group(3))
        if "sorryAx" in m.group(3):
            axioms.add("sorryAx")
        if re.search(r"(?<![\w.])sorry(?![\w'])", m.group(3)):
            self.msg(at, at + len(body.rstrip()), "warning", "declaration uses 'sorry'")
            axioms.add("sorryAx")
        self.env.decls[name] = self.decl(kind, m.group(2), axioms)

    def used_axioms(self, body):
        axioms = set()
        for other, d in self.env.decls.items():
            short = other.rsplit(".", 1)[-1]
            if re.search(r"(?<![\w'])(?:[\w.]*\.)?" + re.escape(short) + r"(?![\w'])", body):
                axioms |= d["axioms"]
        return axioms

    def ill_typed(self, at, sig):
        if "ill_typed" not in sig:
            return False
        at += sig.index("ill_typed")
        self.msg(at, at + 9, "error", "type mismatch\n  ill_typed\nhas type\n  Bool : Type")
        return True

    # ---------------------------------------------------------------- theorems
    def theorem(self, at, text, options):
        m = DECL.match(text)
        kind, raw_name, rest = m.group(1), m.group(2), m.group(3)
        sig, body = split_decl(rest)
        name = self.env.prefix() + raw_name if kind != "example" else None
        if name and name.startswith(self.env.prefix() + "_root_."):
            name = raw_name[7:]
        name_at = at + m.start(2)
        if name and name in self.env.decls:
            self.msg(name_at, name_at + len(raw_name), "error", f"'{name}' has already been declared")
            return
        if kind == "example" and COMPARE.match(text.strip()):
            return self.compare(at, text)
        if self.ill_typed(at + m.start(3), sig):
            return
        self.side_effects(body)
        body_at = at + len(text) - len(body)
        axioms = self.prove(name_at, raw_name, sig, body, body_at, options)
        if axioms is None:
            return
        bad = "DOUBLE_KERNEL_REJECTS" in body
        if bad and "debug.skipKernelTC" not in options and "debug.skipKernelTC" not in self.env.options:
            self.msg(name_at, name_at + len(raw_name), "error", "(kernel) declaration type mismatch")
            return
        if name:
            self.env.decls[name] = self.decl("theorem", sig, axioms, kernel_bad=bad)
            for aux in re.findall(r"^\s+(\w+)\s*:", body.split("\nwhere", 1)[1], re.M) if "\nwhere" in body else ():
                self.env.decls[f"{name}.{aux}"] = self.decl("theorem", "", axioms)

    def side_effects(self, body):
        if "DOUBLE_HANG" in body:
            child = subprocess.Popen(["sleep", "3600"])
            if os.environ.get("LEAN_DOUBLE_CHILD_PID_FILE"):
                with open(os.environ["LEAN_DOUBLE_CHILD_PID_FILE"], "w") as f:
                    f.write(str(child.pid))
            while True:
                time.sleep(60)
        if "DOUBLE_CRASH" in body:
            sys.stderr.write("PANIC: double crash requested\n")
            sys.stderr.flush()
            os._exit(134)
        pause = re.search(r"\bsleep\s+(\d+)", body)
        if pause:
            time.sleep(int(pause.group(1)) / 1000)
        if "DOUBLE_ALLOC" in body:
            try:
                bytearray(4 << 30)
            except MemoryError:
                sys.stderr.write("out of memory\n")
                sys.stderr.flush()
                os._exit(137)

    def prove(self, name_at, raw_name, sig, body, body_at, options):
        """The axioms of a proof that checks, or None after reporting why it does not."""
        concl = conclusion(sig)
        ctx, binders = self.in_scope(sig)
        while body.strip().startswith("(") and body.strip().endswith(")"):  # the old chain's wrapper
            body_at += len(body) - len(body.lstrip()) + 1
            body = body.strip()[1:-1]
        sorry_opts = any(o in options or o in self.env.options for o in SORRY_OPTIONS)
        if re.search(r"(?<![\w.])sorry(?![\w'])", body):
            at = body_at + body.index("sorry")
            self.sorries.append({"goal": f"⊢ {concl}", "proofState": len(self.sorries),
                                 "pos": position(self.cmd, at), "endPos": position(self.cmd, at + 5)})
            self.msg(name_at, name_at + len(raw_name), "warning", "declaration uses 'sorry'")
            return {"sorryAx", *STANDARD_AXIOMS}
        unknown = self.unknown_identifier(f"{binders} {sig}", body)
        if unknown:
            at = body_at + body.index(unknown)
            self.msg(at, at + len(unknown), "error", f"unknown identifier '{unknown}'")
            return None
        term = not body.lstrip().startswith("by") and not body.lstrip().startswith("|")
        tactics = set(TACTICS.findall(body))
        named = self.used_axioms(body) if self.names_declared(body) else None
        # a false conclusion is unprovable only without hypotheses and scopes that change it
        false_goal = is_false(concl) and not ctx and not binders and not re.match(r"\s*[(\[{⦃]", sig)
        if (not term and not tactics) or (false_goal and named is None):
            end = body_at + len(body.rstrip())
            self.msg(body_at, end, "error", f"unsolved goals\n⊢ {concl}")
            return None
        axioms = set(named or ())
        if not term and not tactics <= {"rfl", "decide"} or term and body.strip() != "rfl":
            axioms |= set(STANDARD_AXIOMS)
        if "native_decide" in tactics:
            axioms.add("Lean.ofReduceBool")
        if sorry_opts:
            axioms.add("sorryAx")
        return axioms

    def names_declared(self, body):
        return any(re.search(r"(?<![\w'])(?:[\w.]*\.)?" + re.escape(n.rsplit(".", 1)[-1]) + r"(?![\w'])", body)
                   for n in self.env.decls)

    def unknown_identifier(self, sig, body):
        heads = re.findall(r"(?:\bexact|\bapply|\brefine|:=)\s+([^\s()⟨,\]]+)", body)
        for items in re.findall(r"\b(?:rw|rwa|simp|simp only|simp_all|field_simp|norm_num)\s*\[([^\]]*)\]", body):
            heads += [t.strip().lstrip("←").strip().split(" ")[0] for t in items.split(",") if t.strip()]
        heads += re.findall(r"\bshow\s+([^\s()⟨,]+)", body)
        stripped = body.strip()
        if stripped and not re.match(r"(by|fun|λ|\||⟨|\()", stripped):
            heads.append(re.match(r"[^\s()⟨,]+", stripped).group(0))
        for head in heads:
            root = head.split(".")[0].lstrip("@")
            if not root or root in NOT_NAMES or not (root[0].isalpha() or root[0] == "_") \
                    or "." in head.lstrip("@") and root[0].isupper():
                continue
            if root in LIBRARY or self.env.resolve(root) or self.env.resolve(head.lstrip("@")):
                continue
            if len(re.findall(r"(?<![\w'.])" + re.escape(root) + r"(?![\w'])", sig + "\n" + body)) > 1:
                continue  # bound by the signature or earlier in the body
            return root
        return None

    def compare(self, at, text):
        a, b = COMPARE.match(text.strip()).groups()
        ra, rb = self.env.resolve(a), self.env.resolve(b)
        if ra is None or rb is None:
            self.msg(at, at + len(text.rstrip()), "error", f"unknown identifier '{b if ra else a}'")
        elif not same_type(self.env.decls[ra], self.env.decls[rb]):
            self.msg(at, at + len(text.rstrip()), "error", "type mismatch\n  rfl\nhas type\n  a = a : Prop")

    # ---------------------------------------------------------------- the verifier's queries
    def print_axioms(self, name, start, end):
        full = self.env.resolve(name)
        if full is None:
            self.msg(start, end, "error", f"unknown constant '{name}'")
            return
        used = self.env.decls[full]["axioms"]
        if used:
            order = STANDARD_AXIOMS + sorted(used - set(STANDARD_AXIOMS))
            self.msg(start, end, "info", f"'{full}' depends on axioms: [{', '.join(a for a in order if a in used)}]")
        else:
            self.msg(start, end, "info", f"'{full}' does not depend on any axioms")

    def jury_check(self, body, start, end):
        """check.KERNEL_CHECK as the real #eval answers it: an error it throws, or one info."""
        m = CHECK_TARGET.search(body)
        ref = self.env.decls.get("jury_statement_ref")
        target = m and self.env.decls.get(m.group(1))
        problem = None
        if ref is None:
            problem = "jury-check: no reference statement"
        elif target is None:
            problem = f"jury-check: no target {m.group(1) if m else '?'}"
        elif target["kind"] != "theorem":
            problem = f"jury-check: {m.group(1)} is not a theorem"
        elif not same_type(ref, target):
            problem = "jury-check: the elaborated type differs from the reference"
        else:
            count = sum(n.rsplit(".", 1)[-1] == "test_problem" for n in self.env.decls)
            bad = [n for n, d in self.env.decls.items() if d["kernel_bad"]]
            if count != 1:
                problem = f"jury-check: {count} declarations named test_problem"
            elif bad:
                problem = f"jury-check: kernel replay failed: (kernel) declaration type mismatch, '{bad[0]}'"
        if problem:
            self.msg(start, end, "error", problem)
        else:
            self.msg(start, end, "info", f"jury-check: ok, {len(self.env.decls)} declarations replayed")


def split_decl(rest):
    """(signature, body) of `SIG := BODY` or equation style `SIG | alt ...`."""
    depth = 0
    for i, c in enumerate(rest):
        depth += (c in "([{⟨") - (c in ")]}⟩")
        if depth == 0 and rest.startswith(":=", i):
            return rest[:i], rest[i + 2:]
        if depth == 0 and c == "|" and "\n" in rest[:i] and not rest[:i].rsplit("\n", 1)[-1].strip():
            return rest[:i], rest[i:]
    return rest, ""


def binder_groups(text):
    """The top-level bracketed groups of a binder list: `(a b : ℕ) [Fact p]` -> two groups."""
    groups, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{⦃":
            depth, start = depth + 1, i if depth == 0 else start
        elif c in ")]}⦄":
            depth -= 1
            if depth == 0:
                groups.append(text[start:i + 1])
    return groups


def top_level_split(text, sep):
    """text split at sep where no bracket is open."""
    parts, depth, last = [], 0, 0
    for i, c in enumerate(text):
        depth += (c in "([{⦃⟨") - (c in ")]}⦄⟩")
        if depth == 0 and c == sep and not text.startswith(":=", i):
            parts.append(text[last:i])
            last = i + 1
    return parts + [text[last:]]


def conclusion(sig):
    depth, cut = 0, -1
    for i, c in enumerate(sig):
        depth += (c in "([{⟨") - (c in ")]}⟩")
        if depth == 0 and c == ":" and not sig.startswith(":=", i):
            cut = i
    return " ".join(sig[cut + 1:].split())


def is_false(concl):
    """`False`, or closed numerals (type ascriptions dropped) whose comparison is false."""
    text = re.sub(r"\(\s*(\d+)\s*:\s*[^()]+\)", r"\1", concl).strip()
    if text == "False":
        return True
    m = re.fullmatch(r"([\d\s+\-*%^()]+)(=|≠|<|≤|>|≥)([\d\s+\-*%^()]+)", text)
    if not m:
        return False
    try:
        a, b = (eval(s.replace("^", "**"), {}) for s in (m.group(1), m.group(3)))
    except (SyntaxError, ZeroDivisionError):
        return False
    return not {"=": a == b, "≠": a != b, "<": a < b, "≤": a <= b, ">": a > b, "≥": a >= b}[m.group(2)]


def token_texts(sig):
    """The signature as Lean's tokens, so layout and spacing do not count."""
    try:
        return " ".join(t.text for t in tokenize(sig))
    except LeanLexError:
        return " ".join(sig.split())


def same_type(a, b):
    return a["sig"] == b["sig"] and a["ctx"] == b["ctx"]


def run_command(request, envs):
    if "env" in request and request["env"] is not None:
        if not 0 <= request["env"] < len(envs):
            return {"message": "Unknown environment."}
        env = envs[request["env"]].copy()
    else:
        env = Env()
    cmd = request["cmd"]
    run = Run(cmd, env, "env" in request)
    code = strip_comments(cmd)
    starts = [m.start() for m in COMMAND.finditer(code)]
    if not starts or code[:starts[0]].strip():
        starts.insert(0, 0)
    # `set_option ... in` / `open ... in` on a line of their own belong to the next command
    starts = [s for k, s in enumerate(starts) if k == 0 or not re.search(r"\bin\s*$", code[starts[k - 1]:s])]
    for a, b in zip(starts, starts[1:] + [len(code)]):
        if code[a:b].strip():
            run.command(a, code[a:b], {})
    envs.append(env)
    reply = {"env": len(envs) - 1}
    reply.update({k: v for k, v in (("messages", run.messages), ("sorries", run.sorries)) if v})
    return reply


def read_query():
    """Lines up to an empty one, like REPL's getLines; "" at end of input."""
    query = ""
    while True:
        line = sys.stdin.readline()
        if not line.strip():
            return query + line
        query += line.rstrip()


def main():
    envs = []
    while True:
        query = read_query()
        if query == "":
            return
        if query.startswith("#") or query.startswith("--"):
            continue
        request = json.loads(query)  # fatal on bad JSON, as in the REPL
        sys.stdout.write(json.dumps(run_command(request, envs), indent=1, ensure_ascii=False) + "\n\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
