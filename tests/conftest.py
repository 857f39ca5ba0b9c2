import os
import pathlib

import pytest

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DS_ACCELERATOR", "cpu")


def shared_dir() -> pathlib.Path:
    """../shared beside the repo (as in CI), or JURY_SHARED."""
    env = os.environ.get("JURY_SHARED")
    return pathlib.Path(env) if env else pathlib.Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture(scope="session")
def tiny_model_path():
    from jury.cluster.tiny_model import make_tiny_model

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


@pytest.fixture(scope="session")
def tiny_chain_model_path():
    """The tiny model warmed up on the chain task (`model: tiny-chain`; built once, minutes)."""
    from jury.cluster.tiny_chain import make_tiny_chain_model

    return str(make_tiny_chain_model(progress=False))
