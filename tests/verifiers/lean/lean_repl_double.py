#!/usr/bin/env python3
"""A stand-in for the Lean REPL (leanprover-community/repl) that speaks its exact protocol.

Framing, as REPL/Main.lean does it: read stdin lines until an empty one (each line's
trailing whitespace dropped, the lines joined); end of input ends the program; a query
starting with `#` or `--` is skipped; JSON that does not parse is fatal (the REPL throws).
Each reply is a JSON object spread over several lines (Lean pretty-prints), then a blank
line. Replies: {"env": n, "messages": [...], "sorries": [...]}, empty lists omitted, env
numbers counting up from 0 per process; {"message": "Unknown environment."} for a bad env.

What it "proves" follows simple rules instead of Lean. A command is cut into declarations
at lines starting with a command keyword. A theorem/lemma `NAME SIG := BODY`:
  - BODY contains `DOUBLE_HANG`: spawn a `sleep` child (its pid written to the file named
    by $LEAN_DOUBLE_CHILD_PID_FILE) and never answer, like a runaway tactic;
  - `DOUBLE_CRASH`: print a panic to stderr and exit 134, like a Lean abort;
  - `DOUBLE_ALLOC`: allocate 4 GiB; under RLIMIT_AS that fails and the process exits 137;
  - `sleep N`: sleep N milliseconds first, as Lean's `sleep` tactic does, then go on;
  - `sorry`: a "declaration uses 'sorry'" warning at NAME, a sorries entry with its goal,
    and sorryAx among the axioms;
  - no known closing tactic (norm_num, linarith, nlinarith, simp, omega, decide, rfl,
    ring, positivity, aesop, exact, native_decide): error "unsolved goals";
  - otherwise proved. Axioms: none for a bare `rfl`/`decide`, else propext,
    Classical.choice, Quot.sound; plus Lean.ofReduceBool for `native_decide`; plus those
    of every declared constant the body names (an `axiom` brings itself).
A signature containing `ill_typed` fails to elaborate ("type mismatch"), for a theorem
or an axiom. `axiom NAME SIG` declares NAME. `#print axioms NAME` answers as Lean 4 does:
"'NAME' depends on axioms: [a, b]" or "'NAME' does not depend on any axioms" (info).
`example : @A = @B := rfl` passes when A and B have the same signature (whitespace
ignored), else "type mismatch". `#whoami` (not in Lean) reports uid, pid and network
interfaces, for sandbox tests. A repeated name is "'NAME' has already been declared";
`import` with an env is an error, as in Lean; anything else is "unexpected token".
"""
import json
import os
import re
import socket
import subprocess
import sys
import time

STANDARD_AXIOMS = ["propext", "Classical.choice", "Quot.sound"]
TACTICS = re.compile(r"\b(norm_num|linarith|nlinarith|simp|omega|decide|rfl|ring|positivity|aesop|exact|native_decide)\b")
DECL_START = re.compile(r"^(theorem|lemma|axiom|example|#print|#check|#whoami|#eval|import|set_option|open|namespace|end|def)\b", re.M)
DECL = re.compile(r"(theorem|lemma)\s+([\w.']+)(.*?):=(.*)", re.S)
AXIOM = re.compile(r"axiom\s+([\w.']+)(.*)", re.S)
COMPARE = re.compile(r"example\s*:\s*@([\w.']+)\s*=\s*@([\w.']+)\s*:=\s*rfl\s*$", re.S)


def position(cmd, offset):
    line = cmd.count("\n", 0, offset) + 1
    return {"line": line, "column": offset - (cmd.rfind("\n", 0, offset) + 1)}


def message(cmd, start, end, severity, data):
    return {"severity": severity, "pos": position(cmd, start), "endPos": position(cmd, end), "data": data}


def ill_typed(cmd, start, sig, out):
    if "ill_typed" not in sig:
        return False
    at = start + sig.index("ill_typed")
    out["messages"].append(message(cmd, at, at + 9, "error", "type mismatch\n  ill_typed\nhas type\n  Bool : Type"))
    return True


def run_theorem(cmd, start, text, decls, out):
    """Elaborate one theorem by the rules above; record it in decls unless it fails."""
    m = DECL.match(text)
    name, sig, body = m.group(2), m.group(3), m.group(4)
    name_at = start + m.start(2)
    if name in decls:
        out["messages"].append(message(cmd, name_at, name_at + len(name), "error", f"'{name}' has already been declared"))
        return
    if ill_typed(cmd, start + m.start(3), sig, out):
        return
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
    concl = sig.rsplit(":", 1)[-1].strip()
    axioms = set()
    if "sorry" in body:
        at = start + text.index("sorry", m.start(4))
        out["sorries"].append({"goal": f"⊢ {concl}", "proofState": len(out["sorries"]),
                               "pos": position(cmd, at), "endPos": position(cmd, at + 5)})
        out["messages"].append(message(cmd, name_at, name_at + len(name), "warning", "declaration uses 'sorry'"))
        axioms |= {"sorryAx", *STANDARD_AXIOMS}
    else:
        tactics = set(TACTICS.findall(body))
        if not tactics:
            at = start + m.start(4)
            out["messages"].append(message(cmd, at, at + len(body.rstrip()), "error", f"unsolved goals\n⊢ {concl}"))
            return
        if not tactics <= {"rfl", "decide"}:
            axioms |= set(STANDARD_AXIOMS)
        if "native_decide" in tactics:
            axioms.add("Lean.ofReduceBool")
    for other, (_, other_axioms) in decls.items():
        if re.search(r"(?<![\w.])" + re.escape(other) + r"(?![\w'])", body):
            axioms |= other_axioms
    decls[name] = (" ".join(sig.split()), axioms)


def run_decl(cmd, start, text, has_env, decls, out):
    """One declaration or command of a REPL command; updates decls and out in place."""
    end = start + len(text.rstrip())
    word = text.split(None, 1)[0]
    if word == "import":
        if has_env:
            out["messages"].append(message(cmd, start, end, "error", "invalid 'import' command, it must be used in the beginning of the file"))
        elif any(line.strip() and not line.startswith("import ") for line in text.splitlines()):
            out["messages"].append(message(cmd, start, end, "error", "unexpected token; expected command"))
    elif word in ("set_option", "open"):
        pass
    elif word in ("theorem", "lemma") and DECL.match(text):
        run_theorem(cmd, start, text, decls, out)
    elif word == "axiom" and AXIOM.match(text):
        m = AXIOM.match(text)
        if not ill_typed(cmd, start + m.start(2), m.group(2), out):
            decls[m.group(1)] = (" ".join(m.group(2).split()), {m.group(1)})
    elif word == "#print" and text.split()[1:2] == ["axioms"]:
        name = text.split()[2]
        if name not in decls:
            out["messages"].append(message(cmd, start, end, "error", f"unknown constant '{name}'"))
        elif decls[name][1]:
            order = STANDARD_AXIOMS + sorted(decls[name][1] - set(STANDARD_AXIOMS))
            used = ", ".join(a for a in order if a in decls[name][1])
            out["messages"].append(message(cmd, start, end, "info", f"'{name}' depends on axioms: [{used}]"))
        else:
            out["messages"].append(message(cmd, start, end, "info", f"'{name}' does not depend on any axioms"))
    elif word == "example" and COMPARE.match(text.strip()):
        a, b = COMPARE.match(text.strip()).groups()
        if a not in decls or b not in decls:
            out["messages"].append(message(cmd, start, end, "error", f"unknown identifier '{b if a in decls else a}'"))
        elif decls[a][0] != decls[b][0]:
            out["messages"].append(message(cmd, start, end, "error", "type mismatch\n  rfl\nhas type\n  a = a : Prop"))
    elif word == "#whoami":
        names = [n for _, n in socket.if_nameindex()]
        out["messages"].append(message(cmd, start, end, "info", f"uid={os.getuid()} pid={os.getpid()} interfaces={','.join(names)}"))
    else:
        out["messages"].append(message(cmd, start, end, "error", "unexpected token; expected command"))


def run_command(request, envs):
    if "env" in request and request["env"] is not None:
        if not 0 <= request["env"] < len(envs):
            return {"message": "Unknown environment."}
        decls = dict(envs[request["env"]])
    else:
        decls = {}
    cmd = request["cmd"]
    out = {"messages": [], "sorries": []}
    starts = [m.start() for m in DECL_START.finditer(cmd)]
    if not starts or cmd[:starts[0]].strip():
        starts.insert(0, 0)
    for a, b in zip(starts, starts[1:] + [len(cmd)]):
        if cmd[a:b].strip():
            run_decl(cmd, a, cmd[a:b], "env" in request, decls, out)
    envs.append(decls)
    reply = {"env": len(envs) - 1}
    reply.update({k: v for k, v in out.items() if v})
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
