"""Where Lean runs: the LeanBackend protocol and its implementations.

The checker needs one operation: run a chain of commands where each runs in the
environment its predecessor left, the first in the header's. The local REPL pool does
that with env numbers (repl.ReplPool); a kimina-lean-server, which keeps no env
between requests, does it by sending the chain as one file and giving each command the
messages positioned on its own lines (a proof cannot place messages on lines after its
own end without meta code, which the screen refuses); LeanDojo does it with its command
states (dojo.LeanDojoBackend). LeanGateConfig.backend picks one (load_gate_backend).

    backend = load_backend(LeanReplConfig(...), kimina_url="")   # a ReplPool
    replies = backend.run_chain(["theorem t : 1 + 1 = 2 := by norm_num",
                                 "#print axioms t"], timeout_s=60)
    assert len(replies) == 2
    backend.close()
"""
from __future__ import annotations

import json
import math
import os
import socket
import urllib.error
import urllib.request
import uuid
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from jury.verifiers.lean.repl import (LeanCrash, LeanReplConfig, LeanStartupError, LeanTimeout,
                                      ReplPool, ReplResponse)

if TYPE_CHECKING:
    from jury.protocol.config import LeanGateConfig


class LeanBackend(Protocol):
    identity: str  # what a verdict depends on besides the Lean text: command, toolchain, server

    def run_chain(self, cmds: Sequence[str], *, timeout_s: float) -> list[ReplResponse]:
        """One response per command; raises LeanTimeout past timeout_s, LeanCrash if Lean died."""
        ...

    def close(self) -> None:
        ...


class KiminaBackend:
    """kimina-lean-server (`POST /check`): the server owns Lean's processes and sandbox."""

    def __init__(self, url: str, header: str, *, api_key: str | None = None, http_slack_s: float = 30.0):
        self.url = url.rstrip("/")
        self.header = header
        self.identity = json.dumps(["kimina", self.url])
        self._api_key = api_key
        self._slack = http_slack_s  # the server's queue and header import come on top of Lean's time

    def run_chain(self, cmds: Sequence[str], *, timeout_s: float) -> list[ReplResponse]:
        code, first_lines = self._file(cmds)
        request = {"snippet": {"id": uuid.uuid4().hex, "code": code},
                   "timeout": math.ceil(timeout_s), "reuse": True}
        reply = self._post("/check", request, timeout_s + self._slack)
        if reply.get("error"):
            kind = LeanTimeout if "timed out" in reply["error"] else LeanCrash
            raise kind(f"kimina server {self.url}: {reply['error']}")
        whole = ReplResponse.from_json(reply.get("response") or {"message": "no response"})
        if whole.error:
            return [whole] * len(cmds)
        early = [m for m in whole.errors if m.line < first_lines[0]]
        if early:
            raise LeanStartupError(f"header failed on kimina server {self.url}: {early[0].data}")
        bounds = list(zip(first_lines, first_lines[1:] + [math.inf]))
        return [ReplResponse(env=whole.env,
                             messages=tuple(m for m in whole.messages if lo <= m.line < hi),
                             sorries=tuple(s for s in whole.sorries if lo <= s.line < hi))
                for lo, hi in bounds]

    def _file(self, cmds: Sequence[str]) -> tuple[str, list[int]]:
        """The chain as one file, and each command's first line as the server numbers them.

        The server splits off the leading `import` and blank lines as its header and
        numbers messages from the first line after them.
        """
        code = "\n\n".join([self.header, *cmds])
        lines = code.split("\n")
        body_start = next((i for i, ln in enumerate(lines)
                           if ln.strip() and not ln.strip().startswith("import ")), len(lines))
        first, at = [], self.header.count("\n") + 2
        for cmd in cmds:
            first.append(at - body_start + 1)
            at += cmd.count("\n") + 2
        return code, first

    def _post(self, path: str, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(self.url + path, data=json.dumps(payload).encode(),
                                         headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as r:
                return json.loads(r.read())
        except (socket.timeout, TimeoutError) as e:
            raise LeanTimeout(f"kimina server {self.url}: no answer in {timeout_s:.0f} s") from e
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise LeanCrash(f"kimina server {self.url}: {e}") from e

    def close(self) -> None:
        """Nothing to release: every request is independent."""


def load_backend(repl: LeanReplConfig, kimina_url: str = "") -> LeanBackend:
    """A kimina client when a URL is given (key from $KIMINA_API_KEY), else a local REPL pool."""
    if kimina_url:
        return KiminaBackend(kimina_url, repl.header, api_key=os.environ.get("KIMINA_API_KEY"))
    return ReplPool(repl)


def load_gate_backend(cfg: "LeanGateConfig") -> LeanBackend:
    """The backend LeanGateConfig.backend names (leandojo: verifiers/lean/dojo.py)."""
    if cfg.backend == "leandojo":
        from jury.verifiers.lean.dojo import LeanDojoBackend

        return LeanDojoBackend(cfg.leandojo_repo, cfg.leandojo_commit, cfg.leandojo_file, cfg.leandojo_line)
    return load_backend(cfg.lean, cfg.kimina_url)
