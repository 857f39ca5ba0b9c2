"""Memory over a long run: each role's resident memory and how fast it grows.

    python benchmarks/soak.py --minutes 60 [--config FILE] [--every 30] [--out runs/soak] [-- key=value ...]

Runs `jury train` (a weight sync every step, steps without end) for --minutes once the
first step is done (start-up growth is not a leak), then stops it with Ctrl-C as a person
would. Every --every seconds it sums the RSS (MiB) of the processes of each role among the
driver's descendants only (another run on the machine is not counted): the driver, the
learner ranks, the generator actors, their vLLM engine cores (which run the model on the CPU,
actors/cpu_engine.py; the engine workers under them in vLLM's own layout), the verifier workers and their check processes, the LLM servers, and Ray's own
processes. It prints each role's slope in MiB/min over the whole run and over its last half
(a leak that levels off shows a smaller second number; one that does not, the same or a
larger), and the same per 1,000 learner steps (a leak per sync or per step shows as the same
number whatever else loads the machine; per minute it shrinks when the steps slow down), and writes
soak.json and soak.png to --out. `--report OUT` prints the table of a soak already run (one from
before the per-step figures gets its steps from the run's metrics.jsonl).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROLES = ["driver", "learner", "generator", "engine_core", "engine_worker", "verifier", "check_pool", "llm_server",
         "ray_gcs", "raylet", "ray", "other"]


def role_of(cmd: str, parent_cmd: str) -> str:
    """A process's role from its command line (Ray and vLLM set their processes' titles), or its
    parent's for the processes those spawn."""
    for marker, role in (("ray::Learner", "learner"), ("ray::Generator", "generator"), ("EngineCore", "engine_core"),
                         ("ray::VerifierWorker", "verifier"), ("LLMServer", "llm_server")):
        if marker in cmd:
            return role
    if "resource_tracker" in cmd:
        return "other"
    if "EngineCore" in parent_cmd:
        return "engine_worker"
    # Ray's own processes, the two that hold state apart (a 70-minute soak saw "ray" grow steadily)
    if "gcs_server" in cmd:
        return "ray_gcs"
    if "/raylet" in cmd:
        return "raylet"
    if "ray::VerifierWorker" in parent_cmd:
        return "check_pool"
    return "ray" if "ray" in cmd else "other"


def sample(driver_pid: int) -> dict[str, float]:
    """MiB of resident memory per role, over the driver and its descendants."""
    import psutil

    out = dict.fromkeys(ROLES, 0.0)
    try:
        driver = psutil.Process(driver_pid)
        procs = driver.children(recursive=True)
        out["driver"] = driver.memory_info().rss / 2**20
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            cmd, parent = " ".join(p.cmdline()) or p.name(), p.parent()
            parent_cmd = (" ".join(parent.cmdline()) or parent.name()) if parent else ""
            out[role_of(cmd, parent_cmd)] += p.memory_info().rss / 2**20
        except psutil.Error:  # ended between the listing and the look
            pass
    return out


def slope(t_min: list[float], mib: list[float]) -> float:
    """Least-squares MiB per minute; nan with fewer than two samples."""
    if len(t_min) < 2:
        return float("nan")
    return float(np.polyfit(np.asarray(t_min), np.asarray(mib), 1)[0])


def slopes(samples: list[dict]) -> dict[str, dict[str, float]]:
    """Per role: first and last MiB, and the least-squares slope over the whole soak and over its
    last half, per minute and (where the samples carry the step count) per 1,000 steps."""
    t = [s["t_min"] for s in samples]
    k = [s["steps"] / 1000 for s in samples] if all("steps" in s for s in samples) else None
    half = len(samples) // 2
    out = {}
    for role in ROLES:
        mib = [s["rss_mib"][role] for s in samples]
        if not any(mib):
            continue
        out[role] = {"first_mib": mib[0], "last_mib": mib[-1], "slope_mib_per_min": slope(t, mib),
                     "last_half_slope_mib_per_min": slope(t[half:], mib[half:])}
        if k:
            out[role].update({"slope_mib_per_1k_steps": slope(k, mib),
                              "last_half_slope_mib_per_1k_steps": slope(k[half:], mib[half:])})
    return out


def table(result: dict[str, dict[str, float]]) -> str:
    per_step = all("slope_mib_per_1k_steps" in r for r in result.values())
    rows = [f"{'role':<14}{'first MiB':>11}{'last MiB':>11}{'MiB/min':>10}{'last half':>11}"
            + (f"{'MiB/1k steps':>14}{'last half':>11}" if per_step else "")]
    for role, r in result.items():
        rows.append(f"{role:<14}{r['first_mib']:>11.0f}{r['last_mib']:>11.0f}{r['slope_mib_per_min']:>10.2f}"
                    f"{r['last_half_slope_mib_per_min']:>11.2f}"
                    + (f"{r['slope_mib_per_1k_steps']:>14.2f}{r['last_half_slope_mib_per_1k_steps']:>11.2f}"
                       if per_step else ""))
    return "\n".join(rows)


def steps_done(run_dir: Path) -> int:
    """Learner steps written to the run's metrics.jsonl so far."""
    try:
        with open(run_dir / "metrics.jsonl", "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def steps_from_metrics(samples: list[dict], run_dir: Path) -> list[dict]:
    """Samples of a soak that did not count steps, each given the steps done by its time: the rows
    whose `time_s` is within `t_min` of the first row's (the soak's clock starts at the first step)."""
    from jury.cluster.metrics import read_metrics

    times = [r["time_s"] for r in read_metrics(run_dir)]
    return [{**s, "steps": sum(1 for t in times if t - times[0] <= s["t_min"] * 60)} for s in samples]


def plot(samples: list[dict], path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    t = [s["t_min"] for s in samples]
    for role in ROLES:
        mib = [s["rss_mib"][role] for s in samples]
        if any(mib):
            ax.plot(t, mib, marker=".", label=role)
    ax.set_xlabel("minutes since the first step")
    ax.set_ylabel("RSS (MiB)")
    ax.set_title("resident memory per role")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def first_step_done(run_dir: Path) -> bool:
    metrics = run_dir / "metrics.jsonl"
    return metrics.exists() and metrics.stat().st_size > 0


def soak(minutes: float, every_s: float, out: Path, config: str | None, overrides: list[str],
         startup_timeout_s: float = 900.0) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "run"
    cmd = [sys.executable, "-m", "jury.experiments.cli", "train", *(["--config", config] if config else []),
           "sync_every=1", "steps=1000000", "progress=false", f"run_dir={run_dir}", *overrides]
    log = open(out / "train.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + startup_timeout_s
        while not first_step_done(run_dir):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"soak: the run ended or did not reach its first step (see {out / 'train.log'})")
            time.sleep(1)
        t0, samples = time.monotonic(), []
        while True:
            now = time.monotonic() - t0
            samples.append({"t_min": now / 60, "rss_mib": sample(proc.pid), "steps": steps_done(run_dir)})
            if now >= minutes * 60 or proc.poll() is not None:
                break
            time.sleep(min(every_s, max(0.0, minutes * 60 - now)))
    finally:
        if proc.poll() is None:  # Ctrl-C, as a person stops a run; then the group, if it hangs
            os.kill(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
    result = slopes(samples)
    steps = steps_done(run_dir)
    (out / "soak.json").write_text(json.dumps({"minutes": minutes, "every_s": every_s, "command": cmd,
                                               "steps": steps, "slopes": result, "samples": samples}, indent=1))
    plot(samples, out / "soak.png")
    return {"steps": steps, "slopes": result}


def main(argv: list[str] | None = None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--every", type=float, default=30.0, help="seconds between two samples")
    ap.add_argument("--config", default=None)
    ap.add_argument("--out", default="runs/soak")
    ap.add_argument("--report", default=None, metavar="OUT", help="print the table of a soak already in OUT")
    ap.add_argument("overrides", nargs="*", help="key=value for `jury train` (after --)")
    args = ap.parse_args(argv)
    if args.report:
        done = json.loads((Path(args.report) / "soak.json").read_text())
        samples = done["samples"]
        if not all("steps" in s for s in samples):
            samples = steps_from_metrics(samples, Path(args.report) / "run")
        print(f"{done['steps']} steps in {samples[-1]['t_min']:.1f} min; RSS slopes since the first step:")
        print(table(slopes(samples)))
        return
    res = soak(args.minutes, args.every, Path(args.out), args.config, args.overrides)
    print(f"{res['steps']} steps; RSS slopes since the first step:")
    print(table(res["slopes"]))
    print(f"soak.json and soak.png in {args.out}")


if __name__ == "__main__":
    main()
