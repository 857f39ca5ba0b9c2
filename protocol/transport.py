"""ZeroMQ queues for the data plane: PUSH/PULL with bounded high-water marks.

Each socket is owned by one background thread (ZeroMQ sockets are not thread-safe)
and talks to the role's loop through a bounded `queue.Queue`, so socket I/O runs
beside the compute loop, never in it.

Backpressure and the rule that prevents deadlock: every hop is bounded (the local
queue plus ZeroMQ's high-water marks), so a slow consumer stalls its producer
instead of growing memory. The chain feeder → generators → verifiers → learner has
no cycle, and the feeder admits at most (max_staleness + 1) · batch groups beyond
what the learner has consumed, so the bounds only bite when a stage is slow, and the
learner, which is at the end of the chain, never blocks on a send.
(ZeroMQ's high-water marks count messages; the kernel's TCP buffers hold a few
hundred kilobytes more, so many tiny messages can be in flight, few large ones.)
"""
from __future__ import annotations

import asyncio
import atexit
import collections
import logging
import os
import queue
import threading
import time
from dataclasses import dataclass
from typing import Awaitable, Callable

import zmq

from jury.protocol.messages import DecodeError, Shutdown, decode, encode

log = logging.getLogger(__name__)
_POLL_MS = 100


@dataclass(frozen=True)
class CurveKeys:
    """ZeroMQ CURVE keys of a run (config `curve: true`): encryption and authentication.

    The side that binds is the CURVE server; it accepts only peers that present the
    run's client key, so a process that does not hold the keys cannot put a frame on
    any queue. The driver makes the keys and hands them to the actors over Ray.
    """
    server_public: bytes
    server_secret: bytes
    client_public: bytes
    client_secret: bytes

    @staticmethod
    def generate() -> "CurveKeys":
        sp, ss = zmq.curve_keypair()
        cp, cs = zmq.curve_keypair()
        return CurveKeys(sp, ss, cp, cs)


class _Zap:
    """The context's one ZAP handler (ZeroMQ asks it whether a CURVE peer may connect), which
    allows only the client keys of the CURVE server sockets open now: a closed queue's key goes
    with it, so a later run in the same process does not accept a finished run's key.

    The handler's thread is started once and stopped at the interpreter's exit (atexit runs while
    daemon threads still do), not when the last socket closes: its inproc endpoint is freed by
    libzmq's own thread some time after a close, so a handler started again soon after a stop
    failed to bind it (EADDRINUSE) a few times in a hundred."""

    _lock = threading.Lock()
    _live: dict[int, _Zap] = {}  # id(context) -> its handler

    def __init__(self, ctx):
        from zmq.auth.thread import ThreadAuthenticator

        self.allowed: collections.Counter = collections.Counter()  # client key -> open server sockets
        self.pid = os.getpid()  # a forked child inherits this object, not its thread
        self.auth = ThreadAuthenticator(ctx)
        self.auth.start()
        self.auth.configure_curve_callback(domain="*", credentials_provider=_AllowKeys(self.allowed))

    @classmethod
    def allow(cls, ctx, key: bytes) -> Callable[[], None]:
        """Allow `key` while a server socket of `ctx` uses it; call what this returns once that
        socket is closed."""
        with cls._lock:
            if id(ctx) not in cls._live:
                if not cls._live:
                    atexit.register(cls._stop_all)
                cls._live[id(ctx)] = cls(ctx)
            cls._live[id(ctx)].allowed[key] += 1
        return lambda: cls._release(id(ctx), key)

    @classmethod
    def _release(cls, ctx_id: int, key: bytes):
        with cls._lock:
            if ctx_id not in cls._live:  # a socket closed after the exit stopped the handler
                return
            allowed = cls._live[ctx_id].allowed
            allowed[key] -= 1
            if allowed[key] <= 0:
                del allowed[key]

    @classmethod
    def _stop_all(cls):
        with cls._lock:
            handlers, cls._live = list(cls._live.values()), {}
        for zap in handlers:
            if zap.pid != os.getpid():
                continue
            if zap.auth.pipe is not None:
                zap.auth.pipe.sndtimeo = 1000  # a handler thread already gone must not hold up the exit
            try:
                zap.auth.stop()
            except zmq.ZMQError as e:
                log.warning("could not stop the ZeroMQ CURVE handler at exit: %s", e)


def _secure(sock, keys: CurveKeys | None, server: bool) -> Callable[[], None]:
    """Set the socket's CURVE role; returns what its owner calls once the socket is closed."""
    if keys is None:
        return _nothing
    if server:
        sock.curve_secretkey, sock.curve_publickey, sock.curve_server = keys.server_secret, keys.server_public, True
        return _Zap.allow(zmq.Context.instance(), keys.client_public)  # before the socket binds
    sock.curve_secretkey, sock.curve_publickey = keys.client_secret, keys.client_public
    sock.curve_serverkey = keys.server_public
    return _nothing


def _nothing():
    pass


def _closed(sock, release: Callable[[], None], **close):
    """Close a socket, then let its CURVE key go (_Zap.allow)."""
    try:
        sock.close(**close)
    finally:
        release()


class _AllowKeys:
    def __init__(self, keys):
        self.keys = keys

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self.keys:
            return True
        log.warning("refused a ZeroMQ peer with an unknown CURVE key")
        return False


@dataclass
class QueueStats:
    sent: int = 0
    received: int = 0
    rejected: int = 0  # malformed frames, unknown types, and messages of a type this queue does not take

    def as_dict(self, prefix: str) -> dict[str, int]:
        return {f"{prefix}/sent": self.sent, f"{prefix}/received": self.received, f"{prefix}/rejected": self.rejected}


class RateLimitedLog:
    """One warning line per `interval_s` with the count since the last line: a flood of bad
    frames must not become a flood of log lines (the counters keep the exact numbers)."""

    def __init__(self, interval_s: float = 10.0, logger: logging.Logger = log):
        self.interval_s, self.logger, self.last, self.pending = interval_s, logger, -float("inf"), 0

    def warn(self, fmt: str, *args):
        self.pending += 1
        now = time.monotonic()
        if now - self.last >= self.interval_s:
            more = f" (and {self.pending - 1} more since the last report)" if self.pending > 1 else ""
            self.logger.warning(fmt + more, *args)
            self.last, self.pending = now, 0


class Receiver:
    """A PULL socket, bound to a random port or connected, feeding a bounded local queue.

    `accept` names the message types this queue takes (e.g. only ScoredGroup on the learner's):
    anything else, like a malformed frame, is refused and counted as rejected."""

    def __init__(self, host: str = "127.0.0.1", *, connect: list[str] | None = None,
                 hwm: int = 64, maxsize: int = 64, name: str = "recv", curve: CurveKeys | None = None,
                 accept: tuple[type, ...] = ()):
        self.name, self.stats, self.accept = name, QueueStats(), accept
        self._refusals = RateLimitedLog()
        self._queue: queue.Queue = queue.Queue(maxsize=maxsize)
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.PULL)
        self._sock.setsockopt(zmq.RCVHWM, hwm)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._release = _secure(self._sock, curve, server=not connect)
        self._stop = threading.Event()
        try:
            if connect:
                for ep in connect:
                    self._sock.connect(ep)
                self.endpoint = None
            else:
                port = self._sock.bind_to_random_port(f"tcp://{host}")
                self.endpoint = f"tcp://{host}:{port}"
            self._thread = threading.Thread(target=self._run, name=f"zmq-{name}", daemon=True)
            self._thread.start()
        except BaseException:
            _closed(self._sock, self._release, linger=0)
            raise

    def _run(self):
        try:
            self._receive()
        finally:
            _closed(self._sock, self._release, linger=0)

    def _receive(self):
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(_POLL_MS):
                continue
            frames = self._sock.recv_multipart(copy=False)
            try:
                msg = decode(frames)
                if self.accept and not isinstance(msg, self.accept):
                    raise DecodeError(f"a {type(msg).__name__} does not belong on this queue "
                                      f"(it takes {', '.join(c.__name__ for c in self.accept)})")
            except DecodeError as e:
                self.stats.rejected += 1
                self._refusals.warn("%s: rejected a frame (%s); %d rejected so far", self.name, e, self.stats.rejected)
                continue
            self.stats.received += 1
            while not self._stop.is_set():
                try:
                    self._queue.put(msg, timeout=_POLL_MS / 1000)
                    break
                except queue.Full:
                    continue

    def get(self, timeout: float | None = None):
        """The next message, or None after `timeout` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def serve(self, handle: Callable[[object], None], poll_s: float = 0.5):
        """The receive loop of a consumer: each message to `handle`, in order, until `wake` (its
        owner's stop()) puts a Shutdown in the queue. Returns then."""
        while True:
            msg = self.get(timeout=poll_s)
            if isinstance(msg, Shutdown):
                return
            if msg is not None:
                handle(msg)

    async def serve_async(self, handle: Callable[[object], Awaitable[None]], poll_s: float = 0.2):
        """`serve` for an asyncio actor: the blocking get runs in a thread, `handle` is awaited."""
        while True:
            msg = await asyncio.to_thread(self.get, poll_s)
            if isinstance(msg, Shutdown):
                return
            if msg is not None:
                await handle(msg)

    def wake(self, reason: str = "stop"):
        """Make a blocked `get` return a Shutdown (a local message, never on the wire)."""
        try:
            self._queue.put_nowait(Shutdown(reason))
        except queue.Full:
            pass

    def depth(self) -> int:
        return self._queue.qsize()

    def close(self):
        self._stop.set()
        self._thread.join(timeout=2)


class Sender:
    """A PUSH socket (connected to one or more PULL endpoints, round-robin) fed by a bounded local queue."""

    def __init__(self, endpoints: list[str] | None = None, *, bind_host: str | None = None,
                 hwm: int = 64, maxsize: int = 64, name: str = "send", curve: CurveKeys | None = None):
        self.name, self.stats = name, QueueStats()
        self._queue: queue.Queue = queue.Queue(maxsize=maxsize)
        self._ctx = zmq.Context.instance()
        self._sock = self._ctx.socket(zmq.PUSH)
        self._sock.setsockopt(zmq.SNDHWM, hwm)
        self._sock.setsockopt(zmq.LINGER, 2000)  # let queued frames go out at close
        # only live peers get frames: none queue up for a dead or restarting worker
        self._sock.setsockopt(zmq.IMMEDIATE, 1)
        self._release = _secure(self._sock, curve, server=bool(bind_host))
        self.endpoint = None
        self._connect_requests: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._give_up = float("inf")  # once closing: when a frame no peer takes is dropped (close)
        try:
            if bind_host:
                port = self._sock.bind_to_random_port(f"tcp://{bind_host}")
                self.endpoint = f"tcp://{bind_host}:{port}"
            for ep in endpoints or []:
                self._sock.connect(ep)
            self._thread = threading.Thread(target=self._run, name=f"zmq-{name}", daemon=True)
            self._thread.start()
        except BaseException:
            _closed(self._sock, self._release, linger=0)
            raise

    def _connect_pending(self):
        while not self._connect_requests.empty():
            for ep in self._connect_requests.get():
                self._sock.connect(ep)

    def _run(self):
        try:
            while True:
                self._connect_pending()
                try:
                    frames = self._queue.get(timeout=_POLL_MS / 1000)
                except queue.Empty:
                    if self._stop.is_set():
                        break
                    continue
                if not self._send(frames):
                    break
        finally:
            _closed(self._sock, self._release)

    def _send(self, frames) -> bool:
        """Block on the high-water mark, but stay stoppable: once closing, a frame no peer takes
        is dropped, right away when it is the last, else at the close's deadline with every frame
        queued behind it (False: the socket thread ends; without a peer it would spin forever)."""
        while True:
            try:
                self._sock.send_multipart(frames, copy=False, flags=zmq.NOBLOCK)
                self.stats.sent += 1
                return True
            except zmq.Again:
                if self._stop.is_set() and (self._queue.empty() or time.monotonic() > self._give_up):
                    log.warning("%s: closing with %d unsent message(s)", self.name, 1 + self._queue.qsize())
                    return self._queue.empty()
                self._connect_pending()  # the peer this frame waits for may be a new one
                time.sleep(0.005)

    def send(self, msg, timeout: float | None = None):
        """Encode now (errors surface in the caller), hand the frames to the socket thread."""
        self._queue.put(encode(msg), timeout=timeout)

    def connect(self, endpoints: list[str]):
        """More peers (a restarted worker's new endpoint); only the socket thread may touch the socket."""
        self._connect_requests.put(list(endpoints))

    def depth(self) -> int:
        return self._queue.qsize()

    def close(self, timeout: float = 5.0):
        """Stop after sending what is queued; what no peer takes within `timeout` is dropped."""
        self._give_up = time.monotonic() + timeout
        self._stop.set()
        self._thread.join(timeout=timeout + 1)
