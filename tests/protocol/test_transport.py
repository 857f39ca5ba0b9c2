"""ZeroMQ queues: delivery, bounded backpressure, refusal of malformed frames without stopping."""
import time

import numpy as np
import pytest

from conftest import push_frames

from jury.protocol.messages import PromptTask, RolloutGroup, Sample, Shutdown, encode
from jury.protocol.transport import Receiver, Sender


def _task(i):
    return PromptTask(task_id=f"t{i}", index=i, prompt="p", label=None, source="s")


def test_messages_arrive_in_order_and_bad_frames_are_counted():
    recv = Receiver(name="test")
    try:
        push_frames(recv.endpoint, [
            encode(_task(0)),
            [b"\x92\x01"],                 # valid MessagePack, not a message
            [b"not msgpack at all \xc1"],  # not MessagePack
            encode(_task(1)),
        ])
        got = [recv.get(timeout=5), recv.get(timeout=5)]
        assert [m.task_id for m in got] == ["t0", "t1"]  # the receiver kept running past the bad frames
        assert recv.stats.rejected == 2 and recv.stats.received == 2
        assert recv.get(timeout=0.2) is None
    finally:
        recv.close()


def test_arrays_cross_the_queue_intact():
    recv = Receiver(name="arrays")
    send = Sender([recv.endpoint], name="arrays")
    ids = np.random.randint(0, 50000, size=1024).astype(np.int32)
    lps = -np.random.rand(1024).astype(np.float32)
    group = RolloutGroup(_task(0), np.arange(7, dtype=np.int32), [Sample(ids, lps, "t", "stop")] * 8, 0, 0, "g", 0.0)
    try:
        send.send(group)
        back = recv.get(timeout=5)
        assert len(back.samples) == 8
        np.testing.assert_array_equal(back.samples[7].token_ids, ids)
        np.testing.assert_array_equal(back.samples[7].logprobs, lps)
    finally:
        send.close()
        recv.close()


def test_a_slow_consumer_bounds_the_producer():
    recv = Receiver(hwm=2, maxsize=2, name="slow")
    send = Sender([recv.endpoint], hwm=2, maxsize=2, name="slow")
    payload = "x" * (256 << 10)  # large enough that the kernel's TCP buffers hold only a few
    try:
        sent = 0
        deadline = time.time() + 3
        while time.time() < deadline:
            try:
                send.send(PromptTask(task_id=f"t{sent}", index=sent, prompt=payload, label=None, source="s"),
                          timeout=0.2)
                sent += 1
            except Exception:  # queue.Full: the producer is held back
                break
        # local queues (2 + 2) plus ZeroMQ pipes (a few HWMs) bound what can be in flight
        assert sent < 40, f"{sent} messages accepted by a consumer that reads nothing"
        got = [recv.get(timeout=5) for _ in range(sent)]
        assert [m.index for m in got] == list(range(sent))  # nothing lost once the consumer reads
    finally:
        send.close()
        recv.close()


def test_wake_unblocks_a_waiting_reader():
    recv = Receiver(name="wake")
    try:
        recv.wake("stop")
        assert isinstance(recv.get(timeout=1), Shutdown)
    finally:
        recv.close()


def test_curve_refuses_peers_without_the_run_keys():
    from jury.protocol.transport import CurveKeys

    keys = CurveKeys.generate()
    intruder = CurveKeys.generate()
    stolen_server_key = CurveKeys(keys.server_public, b"", intruder.client_public, intruder.client_secret)
    recv = Receiver(name="secure", curve=keys)
    senders = [Sender([recv.endpoint], name="plain"),                             # no CURVE at all
               Sender([recv.endpoint], name="intruder", curve=stolen_server_key)]  # right server, unknown client
    good = Sender([recv.endpoint], name="good", curve=keys)
    try:
        for i, s in enumerate(senders):
            s.send(_task(100 + i))
        assert recv.get(timeout=1.5) is None  # neither got a frame through
        good.send(_task(1))
        got = recv.get(timeout=5)
        assert got is not None and got.task_id == "t1"
        assert recv.get(timeout=0.5) is None
    finally:
        for s in senders + [good]:
            s.close()
        recv.close()


def test_curve_handler_forgets_a_closed_runs_key_and_stops_at_exit():
    """Two runs in one process, one after the other (as tests and notebooks do): once the first
    run's queue is closed, its client key no longer gets a frame into the second run's queue. The
    process has one handler thread, not one a run, and stops it at its exit: a thread left polling
    the shared context into the interpreter's teardown was there when a CI run segfaulted at exit."""
    import subprocess
    import sys
    import threading

    import zmq

    from jury.protocol.transport import CurveKeys, _Zap

    first, second = CurveKeys.generate(), CurveKeys.generate()
    Receiver(name="first-run", curve=first).close()
    recv = Receiver(name="second-run", curve=second)
    # the first run's client, aimed at the second run's server key
    stale = CurveKeys(second.server_public, b"", first.client_public, first.client_secret)
    senders = [Sender([recv.endpoint], name="stale", curve=stale)]
    try:
        senders[0].send(_task(0))
        assert recv.get(timeout=1.5) is None
        senders.append(Sender([recv.endpoint], name="good", curve=second))
        senders[1].send(_task(1))
        got = recv.get(timeout=5)
        assert got is not None and got.task_id == "t1"
    finally:
        for s in senders:
            s.close()
        recv.close()
    assert sum(type(t).__module__.startswith("zmq.auth") for t in threading.enumerate()) == 1
    # a queue that fails to bind lets its key go too
    third = CurveKeys.generate()
    with pytest.raises(zmq.ZMQError):
        Receiver(host="256.0.0.1", name="unbound", curve=third)
    assert third.client_public not in _Zap._live[id(zmq.Context.instance())].allowed

    script = (
        "import zmq.auth.thread as t\n"
        "stop = t.ThreadAuthenticator.stop\n"
        "def told(self):\n"
        "    stop(self)\n"
        "    print('stopped', self.thread is None, flush=True)\n"
        "t.ThreadAuthenticator.stop = told\n"
        "from jury.protocol.transport import CurveKeys, Receiver\n"
        "Receiver(name='r', curve=CurveKeys.generate()).close()\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    # stopped (its thread joined) by the exit's handler; pyzmq's __del__ calls stop again later, a no-op
    assert done.returncode == 0 and done.stdout.splitlines()[0] == "stopped True", done.stderr


def test_closing_a_sender_no_peer_takes_from_drops_what_is_queued_at_the_deadline(caplog):
    """With no peer (IMMEDIATE: nothing queues for one), a close with frames queued used to leave
    the socket thread retrying forever; it now gives up at the close's deadline and says so."""
    import logging

    sender = Sender(["tcp://127.0.0.1:1"], name="nobody")  # nothing listens there
    for i in range(3):
        sender.send(_task(i))
    with caplog.at_level(logging.WARNING, logger="jury.protocol.transport"):
        sender.close(timeout=0.5)
    assert not sender._thread.is_alive()
    assert "nobody: closing with 3 unsent message(s)" in caplog.text and sender.stats.sent == 0


@pytest.mark.parametrize("curve", [True, False])
def test_a_strangers_pull_socket_on_the_feeders_port_gets_no_task_under_curve(curve):
    """The feeder binds a PUSH socket and generators connect to it. Without CURVE (the control), a
    local process that connects a PULL socket takes tasks in turn with the generator; with the run's
    keys (the default) the stranger gets nothing and the generator gets every task."""
    import threading

    import zmq

    from jury.protocol.transport import CurveKeys

    keys = CurveKeys.generate() if curve else None
    feeder = Sender(bind_host="127.0.0.1", name="feeder", curve=keys)
    stranger = zmq.Context.instance().socket(zmq.PULL)
    stranger.connect(feeder.endpoint)
    generator = Receiver(connect=[feeder.endpoint], name="generator", curve=keys)
    stolen = []

    def steal():
        while stranger.poll(2000):
            stolen.append(stranger.recv_multipart())

    thief = threading.Thread(target=steal)
    thief.start()
    try:
        time.sleep(0.5)  # both connected before the first task
        for i in range(20):
            feeder.send(_task(i))
        got = []
        while (task := generator.get(timeout=3)) is not None:
            got.append(task.task_id)
        thief.join()
        if curve:
            assert got == [f"t{i}" for i in range(20)] and stolen == []
        else:  # round-robin: the stranger took its share, nothing was lost
            assert stolen and len(got) + len(stolen) == 20
    finally:
        thief.join()
        stranger.close(linger=0)
        generator.close()
        feeder.close()


def test_a_queue_takes_only_its_own_message_types():
    """Frames of the wrong kind are refused and counted, not delivered or dropped in silence."""
    from jury.protocol.messages import ScoredGroup, WeightUpdate

    recv = Receiver(name="learner-scored", accept=(ScoredGroup,))
    try:
        push_frames(recv.endpoint, [encode(_task(0)), encode(WeightUpdate(1, [], [], [], [])),
                                    encode(Shutdown("from the wire")), [b"\xc1"]])
        deadline = time.monotonic() + 10
        while recv.stats.rejected < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (recv.stats.rejected, recv.stats.received) == (4, 0)
        assert recv.get(timeout=0.2) is None
    finally:
        recv.close()


def test_a_flood_of_bad_frames_is_counted_exactly_and_logged_rarely(caplog):
    recv = Receiver(name="flooded", hwm=20_000)
    try:
        with caplog.at_level("WARNING", logger="jury.protocol.transport"):
            push_frames(recv.endpoint, [[b"not a message"]] * 10_000)
            deadline = time.monotonic() + 60
            while recv.stats.rejected < 10_000 and time.monotonic() < deadline:
                time.sleep(0.05)
        assert recv.stats.rejected == 10_000
        lines = [r for r in caplog.records if "rejected a frame" in r.getMessage()]
        assert 1 <= len(lines) <= 7, f"{len(lines)} warning lines for 10,000 bad frames"  # one per 10 s at most
    finally:
        recv.close()
