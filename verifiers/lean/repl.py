"""A pool of Lean REPL processes (leanprover-community/repl), sandboxed and time-limited.

Protocol (REPL/Main.lean): one JSON object per command on stdin, commands separated by a
blank line (the REPL reads lines until an empty one). `{"cmd": text}` with no `env`
starts a fresh environment and may `import`; `{"cmd": text, "env": n}` runs in snapshot
n. Each reply is a JSON object, possibly spread over several lines but never containing
an empty one, followed by a blank line: `{"env": m, "messages": [...], "sorries": [...]}`
with empty lists omitted, or `{"message": "..."}` for a REPL-level error.

Each process imports the header once and every proof runs in that header's env, so
Mathlib is loaded once per process, not per proof. The REPL has no time limit of its
own: a command past its deadline kills the process group (Lean, `lake`, their children)
and the process restarts on next use. Memory is capped by RLIMIT_AS, the network by a
fresh network namespace (`unshare --net`), and a root caller drops to `user` (setpriv).

    pool = ReplPool(LeanReplConfig(command="lake env repl", cwd="/opt/mathlib-project"))
    pool.start()                                   # optional: import the header everywhere now
    responses = pool.run_chain(["theorem t : 1 + 1 = 2 := by norm_num",
                                "#print axioms t"], timeout_s=60)
    # command 1 ran in the header's env; command 2 in the env command 1 returned
"""
from __future__ import annotations

import functools
import json
import logging
import os
import pwd
import queue
import resource
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Sequence

from jury.protocol.config import DEFAULT_HEADER, LeanReplConfig  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

class LeanTimeout(Exception):
    """A command ran past its deadline; its process group was killed."""


class LeanCrash(Exception):
    """The REPL died or broke the protocol; the message carries its stderr tail."""


class LeanStartupError(RuntimeError):
    """The REPL could not start or import the header: a configuration problem."""


# ---------------------------------------------------------------- replies
@dataclass(frozen=True)
class LeanMessage:
    severity: str  # error | warning | info | trace
    data: str
    line: int      # 1-based, within the command
    column: int    # 0-based


@dataclass(frozen=True)
class LeanSorry:
    goal: str
    line: int
    column: int


@dataclass(frozen=True)
class ReplResponse:
    env: int | None
    messages: tuple[LeanMessage, ...] = ()
    sorries: tuple[LeanSorry, ...] = ()
    error: str | None = None  # a REPL-level error ({"message": ...}), not a Lean message

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "ReplResponse":
        if "env" not in obj:  # a REPL-level error; a reply with messages but no environment is one too:
            # the chain would reuse it as the answer to the commands after it, and a file can print
            # "... does not depend on any axioms" or "jury-check: ok" itself (#print "...")
            return cls(env=None, error=str(obj.get("message", "a REPL reply without an environment")))
        messages = tuple(LeanMessage(m.get("severity", "error"), m.get("data", ""), *_pos(m))
                         for m in obj.get("messages", ()))
        sorries = tuple(LeanSorry(s.get("goal", ""), *_pos(s)) for s in obj.get("sorries", ()))
        return cls(env=obj.get("env"), messages=messages, sorries=sorries)

    @property
    def errors(self) -> tuple[LeanMessage, ...]:
        return tuple(m for m in self.messages if m.severity == "error")


def _pos(obj: dict[str, Any]) -> tuple[int, int]:
    pos = obj.get("pos") or {}  # the REPL omits a sorry's pos when Lean has none
    return pos.get("line", 0), pos.get("column", 0)


# ---------------------------------------------------------------- sandbox
@functools.lru_cache(maxsize=None)
def _prefix_works(prefix: tuple[str, ...]) -> bool:
    try:
        return subprocess.run([*prefix, "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def sandbox_argv(config: LeanReplConfig) -> list[str]:
    """config.command behind `unshare --net` and, for a root caller, `setpriv` to config.user.

    unshare comes first: making a network namespace needs root (or a user namespace),
    which setpriv then gives up. Both exec in place, so the pid is Lean's (or lake's).
    """
    root = os.geteuid() == 0
    prefix: list[str] = []
    if config.isolate_network != "off":
        net = ("unshare", "--net", "--") if root else ("unshare", "--net", "--map-current-user", "--")
        if shutil.which("unshare") and _prefix_works(net):
            prefix += net
        elif config.isolate_network == "on":
            raise LeanStartupError("LeanReplConfig.isolate_network='on' but `unshare --net` fails here")
        else:
            log.warning("Lean runs with network access: `unshare --net` is unavailable here")
    if root and config.user:
        try:
            pw = pwd.getpwnam(config.user)
        except KeyError:
            raise LeanStartupError(f"LeanReplConfig.user={config.user!r}: no such user") from None
        if not shutil.which("setpriv"):
            raise LeanStartupError(f"LeanReplConfig.user={config.user!r} needs `setpriv` (util-linux)")
        prefix += ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"]
    elif root:
        log.warning("Lean runs as root: LeanReplConfig.user is empty")
    return prefix + shlex.split(config.command)


def _memory_limit(limit_mb: int):
    """preexec_fn: cap the address space. It only calls setrlimit, safe after fork."""
    limit = limit_mb * 1024 * 1024

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply if limit_mb else None


# ---------------------------------------------------------------- one process
class ReplProcess:
    """One REPL with the header imported; not thread-safe (the pool hands it to one caller)."""

    def __init__(self, config: LeanReplConfig, argv: Sequence[str]):
        self.config = config
        self.argv = list(argv)
        self.proc: subprocess.Popen | None = None
        self.header_env = 0
        self.commands = 0  # since the last start, for recycling
        self._buf = b""
        self._stderr: Any = None  # a temporary file: a pipe nobody drains could block Lean

    @property
    def alive(self) -> bool:
        return self.proc is not None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        try:
            self.proc = subprocess.Popen(
                self.argv, cwd=self.config.cwd or None, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=self._stderr, start_new_session=True,
                preexec_fn=_memory_limit(self.config.memory_limit_mb))
        except OSError as e:
            self._stderr.close()
            raise LeanStartupError(f"cannot run {self.argv}: {e}") from e
        self._buf, self.commands = b"", 0
        deadline = time.monotonic() + self.config.start_timeout_s
        try:
            reply = self.send(self.config.header, None, deadline)
        except (LeanTimeout, LeanCrash) as e:
            raise LeanStartupError(f"header import failed: {e}") from e
        if reply.env is None or reply.errors:
            problems = reply.error or "; ".join(m.data for m in reply.errors)
            self.kill()
            raise LeanStartupError(f"header import failed: {problems}")
        self.header_env = reply.env

    def send(self, cmd: str, env: int | None, deadline: float) -> ReplResponse:
        """Run one command; raises LeanTimeout or LeanCrash, after killing the process."""
        request = {"cmd": cmd} if env is None else {"cmd": cmd, "env": env}
        # json.dumps escapes newlines, so the request is one line; the blank line ends it.
        self._write((json.dumps(request, ensure_ascii=False) + "\n\n").encode(), deadline)
        reply = ReplResponse.from_json(self._read_reply(deadline))
        self.commands += 1
        return reply

    def _write(self, data: bytes, deadline: float) -> None:
        fd = self.proc.stdin.fileno()
        os.set_blocking(fd, False)  # a REPL that stopped reading must not block us past the deadline
        view = memoryview(data)
        while view:
            self._wait(fd, deadline, writing=True)
            try:
                view = view[os.write(fd, view):]
            except BrokenPipeError:
                raise self._fail(LeanCrash, "REPL closed its stdin") from None

    def _read_reply(self, deadline: float) -> dict[str, Any]:
        fd = self.proc.stdout.fileno()
        while True:
            sep = self._buf.find(b"\n\n")
            if sep >= 0:
                frame, self._buf = self._buf[:sep], self._buf[sep + 2:]
                obj = _parse_frame(frame.decode("utf-8", "replace"))
                if obj is not None:
                    return obj
                continue
            self._wait(fd, deadline, writing=False)
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise self._fail(LeanCrash, "REPL exited")
            self._buf += chunk

    def _wait(self, fd: int, deadline: float, *, writing: bool) -> None:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(LeanTimeout, "deadline passed")
            r, w, _ = select.select([] if writing else [fd], [fd] if writing else [], [], left)
            if r or w:
                return

    def _fail(self, kind: type[Exception], why: str) -> Exception:
        tail = self.stderr_tail()
        pid = self.pid
        self.kill()
        return kind(f"{why} (pid {pid}); stderr: {tail!r}")

    def stderr_tail(self, limit: int = 2000) -> str:
        if self._stderr is None:
            return ""
        self._stderr.seek(0, os.SEEK_END)
        size = self._stderr.tell()
        self._stderr.seek(max(0, size - limit))
        return self._stderr.read().decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL the whole process group (lake, the REPL, their children) and reap."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # pgid == pid: start_new_session
        except ProcessLookupError:
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self._stderr):
            try:
                stream.close()
            except OSError:
                pass
        self.proc, self._stderr = None, None


def _parse_frame(text: str) -> dict[str, Any] | None:
    """The JSON object in one blank-line-separated frame, skipping stray lines before it."""
    starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n" and text[i + 1:i + 2] == "{"]
    for start in starts:
        try:
            obj = json.loads(text[start:])
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    if text.strip():
        log.warning("skipping REPL output that is not a reply: %r", text[:200])
    return None


# ---------------------------------------------------------------- the pool
class ReplPool:
    """A LeanBackend (backends.LeanBackend) over config.pool_size REPL processes.

    Thread-safe: run_chain blocks until a process is free. A process that timed out or
    crashed is restarted by the next caller that gets it; `restarts` counts these.
    """

    def __init__(self, config: LeanReplConfig):
        self.config = config
        self.identity = config.identity()
        argv = sandbox_argv(config)
        self._all = [ReplProcess(config, argv) for _ in range(config.pool_size)]
        self._idle: queue.Queue[ReplProcess] = queue.Queue()
        for proc in self._all:
            self._idle.put(proc)
        self._lock = threading.Lock()
        self._closed = False
        self.restarts = 0

    def start(self) -> None:
        """Start every process now, in parallel; raises LeanStartupError if any fails."""
        procs = [self._idle.get() for _ in self._all]
        errors: list[Exception] = []

        def boot(p: ReplProcess) -> None:
            try:
                if not p.alive:
                    p.start()
            except LeanStartupError as e:
                errors.append(e)
        threads = [threading.Thread(target=boot, args=(p,)) for p in procs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in procs:
            self._idle.put(p)
        if errors:
            raise errors[0]

    def run_chain(self, cmds: Sequence[str], *, timeout_s: float) -> list[ReplResponse]:
        """cmds[0] in the header env, each next one in the env its predecessor returned.

        One response per command; a REPL-level error repeats for the commands after it.
        The deadline covers the whole chain; past it, LeanTimeout. A dead REPL: LeanCrash.
        """
        proc = self._idle.get()
        try:
            if self._closed:
                raise LeanCrash("pool is closed")
            if not proc.alive:
                proc.start()
            out = self._chain(proc, cmds, time.monotonic() + timeout_s)
            if proc.commands >= self.config.recycle_after:
                proc.kill()  # memory only grows; the next caller starts a fresh one
            return out
        finally:
            if self._closed:
                proc.kill()
            self._idle.put(proc)

    def _chain(self, proc: ReplProcess, cmds: Sequence[str], deadline: float) -> list[ReplResponse]:
        out: list[ReplResponse] = []
        env: int | None = proc.header_env
        try:
            for cmd in cmds:
                out.append(out[-1] if env is None else proc.send(cmd, env, deadline))
                env = out[-1].env
        except (LeanTimeout, LeanCrash):
            with self._lock:
                self.restarts += 1  # send() already killed it
            raise
        return out

    def pids(self) -> list[int]:
        return [p.pid for p in self._all if p.pid is not None]

    def close(self) -> None:
        """Kill the idle processes now; busy ones die when their caller hands them back."""
        self._closed = True
        idle = []
        while True:
            try:
                idle.append(self._idle.get_nowait())
            except queue.Empty:
                break
        for proc in idle:
            proc.kill()
            self._idle.put(proc)  # so later callers get "pool is closed", not a hang
