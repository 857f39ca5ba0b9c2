import os
import pathlib

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DS_ACCELERATOR", "cpu")


_SESSION = []  # the test session, for its exit status at the process's exit


def pytest_sessionstart(session):
    _SESSION.append(session)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """pytest's faulthandler stops at unconfigure, before the interpreter's exit: from here until
    the interpreter's finalization turns it off, a fatal signal prints every thread's Python stack.

    Then the process ends with the session's exit status once Python's exit handlers have run
    (Ray's shutdown, the transport's CURVE handler, logging, multiprocessing), skipping the
    interpreter's finalization and the C++ static destructors. Threads that Ray's core worker,
    gRPC, gloo and vLLM start in this process outlive their libraries' shutdown calls, and the
    destructors freeing what those threads use crashed the process at random after a green summary:
    CI's exit 139 in two of its last five runs (in the second with faulthandler enabled here and no
    Python stack printed, so past the interpreter's finalization; a local run of the whole suite with
    core dumps on exited cleanly). Set JURY_TEST_FINALIZE=1 to exit the usual way."""
    import atexit
    import faulthandler
    import sys

    faulthandler.enable(file=sys.__stderr__, all_threads=True)
    if _SESSION and os.environ.get("JURY_TEST_FINALIZE") != "1":
        atexit.register(_exit_after_handlers, _SESSION[0])  # registered last, so called first


def _exit_after_handlers(session):
    import atexit
    import sys

    atexit.unregister(_exit_after_handlers)
    atexit._run_exitfuncs()  # every other handler, most recent first, as the interpreter would
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(int(session.exitstatus))


def shared_dir() -> pathlib.Path:
    """../shared beside the repo (as in CI), or JURY_SHARED."""
    env = os.environ.get("JURY_SHARED")
    return pathlib.Path(env) if env else pathlib.Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def tiny_model_path():
    from jury.models.tiny import make_tiny_model

    return str(make_tiny_model(progress=False))


def live_pids(pids):
    """The pids of `pids` that still exist and are not zombies."""
    alive = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] != "Z":
                    alive.append(pid)
        except FileNotFoundError:
            pass
    return alive


def descendants(pid):
    """Every process below pid (children, grandchildren, ...)."""
    import psutil

    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


class RunProcesses:
    """Every process that appears below this test process while the block runs, looked at every
    half second: a process orphaned when its parent died is reparented away from this one, so it
    must be remembered while it is still below. This process's own multiprocessing resource
    tracker lives as long as the test process does, and is not the run's.

        with RunProcesses() as run:
            train(cfg)
        assert not run.left(bound_s=30)
    """

    def __enter__(self):
        import threading

        self.before = set(descendants(os.getpid()))
        self.seen: dict = {}   # pid -> psutil.Process
        self.names: dict = {}  # pid -> its name and command line when last seen
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self):
        import psutil

        me = os.getpid()
        while not self._done.wait(0.5):
            try:
                for p in psutil.Process(me).children(recursive=True):
                    if p.pid not in self.before:
                        self.seen.setdefault(p.pid, p)
                        # vLLM and Ray retitle a process after it starts; a process already dead (a
                        # zombie has no command line) keeps the last name it was seen with
                        name = _describe(p)
                        if name != "?" or p.pid not in self.names:
                            self.names[p.pid] = name
            except Exception:  # a process gone mid-scan (psutil.Error, or an OSError of /proc): the next
                pass  # look goes on; a watcher that died here saw nothing more of the run

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()

    def left(self, bound_s: float) -> list[str]:
        """The command lines of the processes seen that are still running after bound_s (waiting
        no longer than it takes them to end)."""
        import time

        import psutil

        def running():
            out = []
            for p in self.seen.values():
                try:
                    if not p.is_running() or p.status() == psutil.STATUS_ZOMBIE:
                        continue
                    if "resource_tracker" in _describe(p) and p.ppid() == os.getpid():
                        continue
                    out.append(f"{p.pid}: {_describe(p)[:160]}")
                except psutil.Error:
                    pass
            return out

        deadline = time.monotonic() + bound_s
        while running() and time.monotonic() < deadline:
            time.sleep(0.5)
        return running()


def _describe(p) -> str:
    try:
        return f"{p.name()} {' '.join(p.cmdline())}"
    except Exception:
        return "?"


def load_jsonl(path):
    """Every problem of a JSONL file with "problem" and "answer" fields, in file order; any bad
    line refuses the whole file (DataError naming its lines): the reader a run uses."""
    from jury.data.files import check_dataset, read_problems
    from jury.protocol.config import DataConfig

    data = DataConfig(format="jsonl")
    check_dataset(str(path), data)
    return list(read_problems(str(path), data))


def push_frames(endpoint: str, items: list[list[bytes]]):
    """Each item's frames sent as they are, in order, from a plain ZeroMQ PUSH socket of our own:
    what anyone who reaches a port can send (a message is encode(msg); a bad one is any bytes)."""
    import zmq

    sock = zmq.Context.instance().socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 5000)
    sock.connect(endpoint)
    try:
        for frames in items:
            sock.send_multipart(frames)
    finally:
        sock.close()


_chain_build: dict = {}  # the background build of the tiny-chain model, when one was started


def pytest_collection_modifyitems(config, items):
    """The tiny-chain model takes about seven minutes of one core to build. When a selected test
    needs it and it is not cached, the build starts now in a background process at the lowest
    priority (nice 19: it runs on the core the rest of the suite leaves idle), and the tests
    that need it run last. The build is single-threaded and seeded, so it is the same build."""
    needs = [it for it in items if "tiny_chain_model_path" in getattr(it, "fixturenames", ())]
    if not needs:
        return
    chosen = {id(it) for it in needs}
    items[:] = [it for it in items if id(it) not in chosen] + needs
    from jury.models.chain import is_built

    if is_built():
        return
    import subprocess
    import sys
    import tempfile

    log = tempfile.NamedTemporaryFile("w+", prefix="tiny-chain-build-", suffix=".log", delete=False)
    _chain_build["log"] = log.name
    _chain_build["proc"] = subprocess.Popen(
        [sys.executable, "-c", "from jury.models.chain import make_tiny_chain_model as m; m()"],
        stdout=log, stderr=subprocess.STDOUT, preexec_fn=lambda: os.nice(19))


def pytest_sessionfinish(session, exitstatus):
    proc = _chain_build.get("proc")
    if proc is not None and proc.poll() is None:  # the run stopped early (-x, Ctrl-C)
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def tiny_chain_model_path():
    """The tiny model warmed up on the chain task (`model: tiny-chain`; built once, minutes)."""
    from jury.models.chain import make_tiny_chain_model

    proc = _chain_build.get("proc")
    if proc is not None:
        if proc.wait() != 0:
            tail = pathlib.Path(_chain_build["log"]).read_text()[-3000:]
            pytest.fail(f"building the tiny-chain model failed (exit {proc.returncode}):\n{tail}")
    return str(make_tiny_chain_model(progress=False))
