"""Groups/s and MB/s through the ZeroMQ queue vs ray.put/ray.get of the same payload.

A RolloutGroup of G = 8 samples x 1024 tokens (token ids int32 + log-probs float32)
goes from a sender thread to a receiver in another process: ZeroMQ PUSH/PULL with
the MessagePack codec, and Ray's object store (put in one process, get in another).
All measured side by side in one run, ZeroMQ plain and under CURVE (the default).

    python benchmarks/transport.py [--groups 2000] [--tokens 1024] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time

import numpy as np

from jury.protocol.messages import PromptTask, RolloutGroup, Sample, decode, encode


def make_group(g: int, tokens: int) -> RolloutGroup:
    rng = np.random.default_rng(0)
    samples = [Sample(rng.integers(0, 150_000, tokens).astype(np.int32), -rng.random(tokens).astype(np.float32),
                      "x" * 200, "length") for _ in range(g)]
    task = PromptTask(task_id="t", index=0, prompt="p" * 300, label="1", source="bench")
    return RolloutGroup(task, np.arange(128, dtype=np.int32), samples, 0, 0, "g0", 0.0)


def payload_bytes(group) -> int:
    return sum(len(memoryview(f).cast("B")) for f in encode(group))


def _zmq_consumer(endpoint, n, out, curve):
    from jury.protocol.transport import Receiver

    r = Receiver(connect=[endpoint], hwm=64, maxsize=64, name="bench", curve=curve)
    t0 = None
    for i in range(n):
        msg = r.get(timeout=60)
        assert isinstance(msg, RolloutGroup), msg
        if t0 is None:
            t0 = time.perf_counter()
    out.put((time.perf_counter() - t0, n - 1))
    r.close()


def bench_zmq(group, n: int, curve=None) -> float:
    """curve: the run's CurveKeys (encrypted and authenticated, as runs are by default), or None."""
    from jury.protocol.transport import Sender

    s = Sender(bind_host="127.0.0.1", hwm=64, maxsize=64, name="bench", curve=curve)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_zmq_consumer, args=(s.endpoint, n, q, curve))
    p.start()
    for _ in range(n):
        s.send(group)  # encodes each time, as a generator does
    dt, count = q.get(timeout=300)
    p.join()
    s.close()
    return count / dt


def bench_ray(group, n: int) -> float:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)

    @ray.remote
    def consume(refs):
        t0 = time.perf_counter()
        for r in refs:
            g = ray.get(r[0])
            assert len(g.samples) == len(group.samples)
        return time.perf_counter() - t0

    try:
        t0 = time.perf_counter()
        refs = [[ray.put(group)] for _ in range(n)]  # wrapped so the task gets refs, not values
        put_s = time.perf_counter() - t0
        get_s = ray.get(consume.remote(refs))
    finally:
        ray.shutdown()
    return n / (put_s + get_s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=2000)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    group = make_group(args.group_size, args.tokens)
    size = payload_bytes(group)
    t0 = time.perf_counter()
    for _ in range(200):
        decode(encode(group))
    codec_per_s = 200 / (time.perf_counter() - t0)
    from jury.protocol.transport import CurveKeys

    zmq_gps = bench_zmq(group, args.groups)
    curve_gps = bench_zmq(group, args.groups, CurveKeys.generate())
    ray_gps = bench_ray(group, args.groups)
    rows = {"payload_bytes": size, "codec_round_trips_per_s": codec_per_s,
            "zmq_groups_per_s": zmq_gps, "zmq_MB_per_s": zmq_gps * size / 1e6,
            "zmq_curve_groups_per_s": curve_gps, "curve_over_plain": curve_gps / zmq_gps,
            "ray_groups_per_s": ray_gps, "ray_MB_per_s": ray_gps * size / 1e6, "zmq_over_ray": zmq_gps / ray_gps}
    print(f"group: {args.group_size} x {args.tokens} tokens, {size / 1e3:.1f} kB on the wire")
    print(f"{'path':<28}{'groups/s':>12}{'MB/s':>10}")
    print(f"{'ZeroMQ + MessagePack':<28}{zmq_gps:>12.0f}{zmq_gps * size / 1e6:>10.0f}")
    print(f"{'  the same under CURVE':<28}{curve_gps:>12.0f}{curve_gps * size / 1e6:>10.0f}")
    print(f"{'ray.put / ray.get':<28}{ray_gps:>12.0f}{ray_gps * size / 1e6:>10.0f}")
    print(f"ratio ZeroMQ / Ray: {zmq_gps / ray_gps:.2f}x, CURVE / plain: {curve_gps / zmq_gps:.2f}x   "
          f"(codec alone: {codec_per_s:.0f} round trips/s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
