"""`jury simulate`: a discrete-event model of the pipeline (SimPy), to plan a run before renting it.

    jury simulate --config configs/chain.yaml [--costs configs/simulate/costs.yaml]
                  [--calibration runs/bench-DIR] [--out DIR] [key=value ...] [costs.a.b=value ...]
    jury simulate --calibration runs/bench-DIR --compare     # each bench run: predicted / measured
    jury simulate --calibration runs/bench-DIR --sharing-from max_staleness=1 --compare

It runs the loop the driver runs (cluster/driver.py), with time taken from the stage costs
(experiments/sim_costs.py) instead of from engines:

    feeder     admits up to (v + window)·B tasks (+ one per dropped group) at generator version v,
               the run plan's window (protocol/plan.py); forced staleness holds task i back until
               version b - k_i, with the feeder's own draw (cluster/feeder.py: draw_staleness)
    generator  an engine in decode steps: every running sequence gets one token per step, the step
               takes Generation.decode_step_s(running); a group starts while it has fewer than
               max_tasks_in_flight groups and its G sequences fit under max_num_seqs
    verifier   num_verifiers workers, first come first served, G·check_s + gate_s per group
    learner    batch s = indices [s·B, (s+1)·B) (admission: batch) or the first B scored (continuous,
               dropping groups past max_staleness under over_budget=drop), then the step's time
    sync       every sync_every steps: the generators stop taking tasks and drain (wait for their
               groups), interrupt (abort them, to start again on the new weights) or pause
               (inflight: their groups go on afterwards); then the sync's own time; version = step + 1
    driver     admits the next tasks, then its bookkeeping (Learner.overhead_s) before the next step

With --hardware the costs come from GPU formulas (experiments/sim_gpu.py), and --sweep runs a grid of
generator:learner splits and staleness bounds (experiments/sim_sweep.py).

Where roles share cores (costs.sharing, one CPU machine), the learner's steps and the engines' decode
steps are Work: each runs at its alone rate, slowed by its factor while the other role is busy,
re-rated at every start and end (processor sharing). The factors are fitted to one run of the
calibration bench (--sharing-from: an asynchronous run, where the roles overlap throughout).

What it does not model yet: the verifiers' share of the cores, the verifiers' round-robin queues (one shared queue
here), prompts' lengths, and preemption in the engine. Settings it does not model are refused by
name (`unmodelled`). Every random draw is a pure function
of (seed, task index), so a run is the same for a seed whatever the order events happen in.
"""
from __future__ import annotations

import math
import random
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from pathlib import Path

import simpy

from jury.cluster.feeder import draw_staleness
from jury.experiments.sim_costs import (Costs, Sharing, _bench_report, asynchronous_runs, calibrate, calibration_run,
                                        engine_spin_s, learner_passes, machine_cores, monitor_passes, sharing_run,
                                        with_cores)
from jury.protocol.config import ConfigError, RunConfig
from jury.protocol.plan import RunPlan, make_plan

WARMUP_STEPS = 2  # as `jury bench` (experiments/bench.py): throughput is timed after the first two steps


def unmodelled(cfg: RunConfig, plan: RunPlan) -> list[str]:
    """The settings of this config the model does not have, by name (empty: it can be simulated)."""
    out = []
    if cfg.dynamic_sampling:
        out.append("dynamic_sampling (refills)")
    if plan.faults:
        out.append("faults")
    if cfg.derl.enabled:
        out.append("derl.enabled")
    if cfg.verifier.reward == "coreward":  # G samples of the prompt and G of its rewrite per task
        out.append("verifier.reward=coreward")
    if cfg.eval.every:
        out.append("eval.every")
    if cfg.checkpoint_every:
        out.append("checkpoint_every")
    gate_roles = {"formalizer", "checker", "prover"}  # the Lean gate's servers: in costs.verifier.gate_s
    out += [f"verifier LLM role {r}" for r in plan.role_models if r not in gate_roles]
    return out


@dataclass
class Group:
    """One task's journey: what the ledger records of it."""

    index: int
    lengths: list[int]
    version_start: int = -1
    version_end: int = -1
    step: int = -1
    remaining: list[int] = field(default_factory=list)  # tokens still to generate per sample

    @property
    def tokens(self) -> int:
        return sum(self.lengths)


class Work:
    """A stretch of one role's work, `amount` seconds as it takes alone, advancing at the rate the
    roles busy beside it leave it (Simulation.rate): processor sharing of the cores. It counts as
    busy from creation to its end; each start and end re-rates every other Work in progress, which
    is interrupted, banks what it did at its old rate, and goes on at the new one."""

    def __init__(self, sim: "Simulation", role: str, amount: float, owner: str = ""):
        self.sim, self.role, self.amount, self.created = sim, role, amount, sim.env.now
        self.owner = owner  # the engine whose decode steps these are (the cores model counts engines)
        self.done, self.since, self.rate = 0.0, sim.env.now, 1.0
        self.waiting = False  # in its timeout: only then can it take an interrupt
        self.nudged = False   # an interrupt is on its way: one is enough, it reads the rate when it lands
        sim.busy(self)
        self.rate = sim.rate(role)
        self.process = sim.env.process(self._run())

    def progress(self) -> float:
        """Seconds of alone work done by now."""
        return self.done + (self.sim.env.now - self.since) * self.rate if self.waiting else self.done

    def nudge(self):
        if self.waiting and not self.nudged:
            self.nudged = True
            self.process.interrupt()

    def shorten(self, amount: float):
        """End once `amount` is done (an engine stopping after the step in flight)."""
        self.amount = amount
        self.nudge()

    def _run(self):
        env = self.sim.env
        while self.amount - self.done > 1e-12 * max(1.0, self.amount):
            self.rate, self.since, self.waiting = self.sim.rate(self.role), env.now, True
            try:
                yield env.timeout((self.amount - self.done) / self.rate)
                self.done = self.amount
            except simpy.Interrupt:
                self.done += (env.now - self.since) * self.rate
                self.nudged = False
            self.waiting = False
        self.sim.idle(self)


class Engine:
    """One generator: continuous batching in decode steps (vLLM's scheduler, without preemption).

    Between two changes (a sequence finishing, a task it could start arriving, a sync stopping it)
    every decode step is alike, so the engine waits out all of them at once and counts the tokens
    after: a run of thousands of tokens per sequence costs a few events per group, not one per token.
    A change from outside interrupts that wait, and the engine finishes the step in flight first."""

    def __init__(self, sim: "Simulation", name: str):
        self.sim, self.name = sim, name
        self.running: list[Group] = []
        self.retry: deque[Group] = deque()  # interrupted: first in line on the new weights
        self.open, self.pausing, self.aborting = True, False, False
        self.version = 0
        self.busy_s = 0.0
        self.trace: list[tuple[float, int]] = []  # (time, sequences running) at each change
        self.wake: simpy.Event | None = None
        self.stepping = False  # waiting out decode steps: an outside change interrupts it
        self.stopped: simpy.Event | None = None  # triggered when a drain/abort/pause has taken hold
        self.rebuild_tokens = 0  # KV to prefill again before the next step (rebuild_kv_after_sync)
        self.interrupted = 0  # groups aborted at a sync, to start over (as the generator's counter)
        self.process = sim.env.process(self.loop())

    def poke(self):
        """Something changed outside: wake the engine if idle, or interrupt its steps if it matters now."""
        if self.wake is not None and not self.wake.triggered:
            self.wake.succeed()
        elif self.stepping and (self.pausing or self.aborting or self._next_fits()):
            self.stepping = False
            self.process.interrupt()

    def _next_fits(self) -> bool:
        g = self.sim.cfg.generator
        queue = self.retry or self.sim.ready
        return (self.open and bool(queue) and len(self.running) < g.max_tasks_in_flight
                and (self.sequences() + len(queue[0].lengths) <= g.max_num_seqs or not self.running))

    def _start_groups(self) -> int:
        started = 0
        while self._next_fits():
            group = (self.retry or self.sim.ready).popleft()
            group.version_start, group.remaining = self.version, list(group.lengths)
            self.running.append(group)
            started += 1
        if started:
            self.sim.trace_queues()
        return started

    def _held_waiting(self) -> int:
        """Groups this engine's generator holds that vLLM has not started: the generator takes up to
        max_tasks_in_flight tasks and the engine runs those that fit max_num_seqs, the rest wait in
        its queue (here: in `ready`, shared by the engines, each taken to hold its share). An
        interrupt cancels them too, and the generator's `interrupted` counts them."""
        slots = max(0, self.sim.cfg.generator.max_tasks_in_flight - len(self.running))
        return min(slots, len(self.sim.ready) // len(self.sim.engines))

    def sequences(self) -> int:
        return sum(1 for grp in self.running for r in grp.remaining if r > 0)

    def loop(self):
        costs, env = self.sim.costs.generation, self.sim.env
        while True:
            if self.aborting:  # interrupt: what ran is lost; the tasks start again after the sync
                self.interrupted += len(self.running) + self._held_waiting()
                self.retry.extend(self.running)
                self.running = []
            started = self._start_groups() if not self.pausing else 0
            if self.pausing or not self.running:
                self.trace.append((env.now, 0))
                if self.stopped is not None and not self.stopped.triggered:
                    self.stopped.succeed()
                self.wake = env.event()
                yield self.wake
                continue
            running = self.sequences()
            self.trace.append((env.now, running))
            dt = costs.decode_step_s(running)
            # the step that starts new groups prefills them too, and after a sync any KV to rebuild (of
            # a mixture, with the experts its prompt tokens reach and the decode does not): each added,
            # as the prefill's compute is, an upper bound where the engine overlaps reads and compute
            first = dt + costs.prefill_s * started + costs.prefill_s / costs.prompt_tokens * self.rebuild_tokens \
                + costs.prefill_experts_s(running, started * costs.prompt_tokens + self.rebuild_tokens)
            self.rebuild_tokens = 0
            steps = min(r for grp in self.running for r in grp.remaining if r > 0)  # until one finishes
            start = env.now
            work = Work(self.sim, "generator", first + (steps - 1) * dt, owner=self.name)
            self.stepping = True
            try:
                yield work.process
                done = steps
            except simpy.Interrupt:  # finish the step in flight (its work, alone), then look at the change
                elapsed = work.progress()
                done = steps if dt <= 0 else min(steps, 1 + (max(0, math.floor((elapsed - first) / dt) + 1)
                                                            if elapsed >= first else 0))
                work.shorten(first + (done - 1) * dt)
                yield work.process
            self.stepping = False
            self.busy_s += env.now - start
            for grp in list(self.running):
                grp.remaining = [max(0, r - done) for r in grp.remaining]
                if not any(grp.remaining):
                    grp.version_end = self.version
                    self.running.remove(grp)
                    env.process(self.sim.verify(grp))

    def stop_for_sync(self, mode: str) -> simpy.Event:
        """Stop taking tasks; the event fires once the mode's condition holds (drain: no group left)."""
        self.open = False
        self.pausing = mode == "inflight"
        self.aborting = mode == "interrupt"
        self.stopped = self.sim.env.event()
        self.poke()
        return self.stopped

    def resume(self, version: int):
        gen = self.sim.costs.generation
        if self.pausing and gen.rebuild_kv_after_sync:  # each running sequence: its prompt and tokens so far
            self.rebuild_tokens = sum(gen.prompt_tokens + length - left for grp in self.running
                                      for length, left in zip(grp.lengths, grp.remaining) if left > 0)
        self.version, self.open, self.pausing, self.aborting = version, True, False, False
        self.stopped = None
        self.poke()


def model_identity(model: str) -> str:
    """A model as a calibration compares it: a local model by its name, whether given as the name or as
    the folder a run resolved it to ("tiny" and ~/.cache/jury-rl/tiny-model), anything else by its
    folder's name (/mnt/models/Qwen3-1.7B and Qwen/Qwen3-1.7B are one model)."""
    from jury.models.registry import LOCAL_MODELS, is_local

    if is_local(model):
        return model
    name = Path(model).name
    return next((local for local in LOCAL_MODELS if name in (local, f"{local}-model")), name)


def unpriced(cfg: RunConfig, costs: Costs) -> list[str]:
    """Settings these costs cannot price, by name: a calibration of another model (its decode and
    learner costs are that model's)."""
    model = dict(costs.calibrated_at).get("model")
    if model is not None and model_identity(model) != model_identity(cfg.model):
        return [f"model={cfg.model} with costs calibrated on model={model} (calibrate on a bench of this model, "
                "or use --hardware)"]
    return []


def assumptions(cfg: RunConfig, costs: Costs) -> list[str]:
    """What the simulation takes as given that the run might not do, said with the report: costs stated
    rather than measured, a Lean gate priced at no time (every proof cached: a warm gate), and a run
    whose length the data set would cap."""
    out = []
    if costs.source == "stated":
        out.append("the stage costs are stated, not measured (configs/simulate/costs.yaml, or --costs): tied to no "
                   "run, they price no learner.micro_batch, dtype or model, and learner.num_ranks divides the "
                   "training with no ZeRO traffic; --calibration BENCH_OR_RUN_DIR fits them to this machine, "
                   "--hardware NAME prices a GPU run")
    if costs.source == "hardware" and "dataset" not in dict(costs.calibrated_at):
        n = costs.generation.lengths
        shape = {"fixed": f"{n.tokens} tokens each", "lognormal": f"lognormal, median {n.median:g}, sigma {n.sigma:g}",
                 "empirical": f"{len(n.values)} values given", "trace": "a trace given"}[n.kind]
        out.append(f"completion lengths are stated, not measured ({shape}), as is the prompt "
                   f"({costs.generation.prompt_tokens} tokens): on GPUs they decide which role binds; give the "
                   "task's (costs.generation.lengths.*, costs.generation.prompt_tokens) or --calibration a bench of it")
    if cfg.verifier.reward == "jury" and cfg.verifier.gate == "lean" and not costs.verifier.gate_s:
        out.append("verifier.gate=lean priced at costs.verifier.gate_s=0, a warm gate (every proof cached); a cold "
                   "Lean gate takes minutes a group: set costs.verifier.gate_s (docs/simulate.md's plan: 200)")
    if cfg.data.epochs:
        out.append(f"data.epochs={cfg.data.epochs} may end the run before steps={cfg.steps}: the simulator does not "
                   "read the data set, and runs every step")
    window = make_plan(cfg).window
    if cfg.steps <= WARMUP_STEPS:
        out.append(f"steps={cfg.steps}: no step after the {WARMUP_STEPS} warm-up steps that throughput is timed after "
                   f"(as jury bench): the figures are the warm-up's (give steps >= "
                   f"{WARMUP_STEPS + STEADY_WINDOWS * window})")
    elif cfg.steps - WARMUP_STEPS < STEADY_WINDOWS * window:
        out.append(f"{cfg.steps - WARMUP_STEPS} timed steps for an admission window of {window} batches: the figures "
                   f"may still be the first window's, generated together, not the steady state (give steps >= "
                   f"{WARMUP_STEPS + STEADY_WINDOWS * window})")
    return out


STEADY_WINDOWS = 4  # timed steps, in admission windows, before a simulation's figures are taken as its steady state


def outside_calibration(cfg: RunConfig, costs: Costs) -> list[str]:
    """Why these costs may not carry to this run (empty: they do): settings that differ from those of
    the run a calibration fitted them to (sim_costs.CALIBRATED_SETTINGS) and, where roles share cores,
    from the layout the sharing factors were fitted at."""
    from jury.experiments.sim_costs import setting

    out = [f"{key}={setting(cfg, key)}, calibrated at {value}" for key, value in costs.calibrated_at
           if key != "model" and setting(cfg, key) != value]  # (the model is refused, not flagged: unpriced)
    named = {line.split("=", 1)[0] for line in out}
    return out + [line for line in costs.sharing.outside(cfg.learner.threads, cfg.num_generators)
                  if line.split("=", 1)[0] not in named]


class Simulation:
    def __init__(self, cfg: RunConfig, costs: Costs):
        self.plan = make_plan(cfg)
        refused = unmodelled(cfg, self.plan) + unpriced(cfg, costs)
        if refused:
            raise ConfigError(f"not modelled (yet): {', '.join(refused)}")
        self.cfg, self.costs = cfg, costs
        self.outside_calibration = outside_calibration(cfg, costs)
        self.assumptions = assumptions(cfg, costs)
        # the learner's compute a token against what costs.learner.token_s was for: the passes its ranks
        # share (sim_costs.learner_passes) and those rank 0 runs alone (the monitor's: monitor_passes)
        self.shared_passes = learner_passes(cfg) / costs.learner.passes
        self.rank0_passes = monitor_passes(cfg) / costs.learner.passes
        self.env = simpy.Environment()
        self.B = cfg.batch_groups
        self.ready: deque[Group] = deque()        # sent by the feeder, not taken by an engine yet
        self.held: dict[int, Group] = {}          # forced staleness: admitted, not released
        self.pending: dict[int, Group] = {}       # admitted, not trained or dropped
        self.admitted, self.dropped = 0, 0
        self.inbox: dict[int, tuple[float, Group]] = {}  # scored, at the learner: index -> (arrival, group)
        self.arrival: simpy.Event = self.env.event()
        self.version = 0
        self.verifiers = simpy.Resource(self.env, capacity=cfg.num_verifiers)
        self.verify_spans: list[tuple[float, float]] = []  # (start, end) of each group's check
        self.engines = [Engine(self, f"generator{i}") for i in range(cfg.num_generators)]
        self.trained: list[Group] = []
        self.steps: list[dict] = []  # per step: end time, wait_s, train_s, sync_s
        self.working: set[Work] = set()  # the roles' work in progress, sharing the cores
        self.decoded_until: dict[str, float] = {}  # engine -> when its last decode work ended (its spin)
        # (time, tasks waiting for an engine, groups at the verifiers (waiting or being checked), groups
        # scored and waiting for the learner) at each change: the queues over time (timeline.png)
        self.queue_trace: list[tuple[float, int, int, int]] = []
        self.wall_s = {"learner": 0.0, "generator": 0.0}   # each role's finished work: as it ran,
        self.alone_s = {"learner": 0.0, "generator": 0.0}  # and as it would have run alone

    # ── the cores the roles share ──
    def rate(self, role: str) -> float:
        """A role's speed relative to alone: slowed by its sharing factor while the other role works,
        or (the learner, with the cores model) by its threads' share of the cores the busy engines leave."""
        sharing = self.costs.sharing
        if role == "learner" and sharing.cores:
            decoding = {w.owner for w in self.working if w.role == "generator"}
            spinning = sum(1 for owner, end in self.decoded_until.items()
                           if owner not in decoding and self.env.now < end + sharing.spin_s)
            return sharing.learner_rate(self.cfg.learner.threads, self.cfg.num_generators, len(decoding), spinning)
        other = "generator" if role == "learner" else "learner"
        factor = getattr(sharing, role)
        return 1 / (1 + factor) if factor and any(w.role == other for w in self.working) else 1.0

    def busy(self, work: Work):
        self.working.add(work)
        self._rerate()

    def idle(self, work: Work):
        self.working.discard(work)
        self.wall_s[work.role] += self.env.now - work.created
        self.alone_s[work.role] += work.amount
        if work.role == "generator" and self.costs.sharing.cores and self.costs.sharing.spin_s:
            self.decoded_until[work.owner] = self.env.now
            self.env.process(self._spin_ends(self.costs.sharing.spin_s))
        self._rerate()

    def _spin_ends(self, spin_s: float):
        """An engine's worker stops spinning spin_s after its last step: the learner's rate changes then."""
        yield self.env.timeout(spin_s)
        self._rerate()

    def _rerate(self):
        for w in self.working:
            if w.rate != self.rate(w.role):
                w.nudge()

    def trace_queues(self):
        """Record the queues now, where they changed since the last record."""
        state = (len(self.ready), len(self.verifiers.queue) + self.verifiers.count, len(self.inbox))
        if not self.queue_trace or self.queue_trace[-1][1:] != state:
            self.queue_trace.append((self.env.now, *state))

    # ── feeder ──
    def limit(self) -> int:
        return (self.version + self.plan.window) * self.B + self.dropped

    def admit(self):
        total = self.cfg.steps * self.B + self.dropped
        g = self.cfg.generator
        while self.admitted < min(self.limit(), total):
            i = self.admitted
            rng = random.Random(f"{self.cfg.seed}/lengths/{i}")
            group = Group(i, self.costs.generation.lengths.draw(rng, g.group_size, g.max_new_tokens, i,
                                                                 g.min_new_tokens))
            self.pending[i] = group
            if self.plan.forced:
                self.held[i] = group
            else:
                self.ready.append(group)
            self.admitted += 1
        for i in sorted(i for i in self.held if self.release_version(i) <= self.version):
            self.ready.append(self.held.pop(i))
        for e in self.engines:
            e.poke()
        self.trace_queues()

    def release_version(self, index: int) -> int:
        return max(0, index // self.B - draw_staleness(self.plan.forced, self.cfg.seed, index))

    # ── verifier ──
    def verify(self, group: Group):
        with self.verifiers.request() as req:
            self.trace_queues()
            yield req
            # the worker's check processes take the group's G samples pool_workers at a time (a worker
            # scores one group at a time: more processes than samples sit idle)
            rounds = math.ceil(len(group.lengths) / self.cfg.verifier.pool_workers)
            dt = rounds * self.costs.verifier.check_s + self.costs.verifier.gate_s
            start = self.env.now
            yield self.env.timeout(dt)
            self.verify_spans.append((start, self.env.now))
        self.inbox[group.index] = (self.env.now, group)
        self.trace_queues()
        if not self.arrival.triggered:
            self.arrival.succeed()

    def _until(self, condition):
        while not condition():
            self.arrival = self.env.event()
            yield self.arrival

    # ── learner and driver ──
    def take_batch(self, step: int):
        """Batch `step`'s groups out of the inbox (dropping, under continuous admission, the stale)."""
        adm = self.plan.admission
        if not adm.continuous:
            indices = range(step * self.B, (step + 1) * self.B)
            yield from self._until(lambda: all(i in self.inbox for i in indices))
            batch = [self.inbox.pop(i)[1] for i in indices]
            self.trace_queues()
            return batch, []
        dropped: list[int] = []

        def ready():
            if adm.drop_stale:
                stale = [i for i, (_, grp) in self.inbox.items() if step - grp.version_start > adm.max_staleness]
                for i in stale:
                    del self.inbox[i]
                    del self.pending[i]
                dropped.extend(stale)
                if stale:  # new tasks take their places (the driver admits them once told)
                    self.dropped += len(stale)
                    self.admit()
            return len(self.inbox) >= self.B

        yield from self._until(ready)
        first = sorted(self.inbox, key=lambda i: (self.inbox[i][0], i))[: self.B]
        batch = [self.inbox.pop(i)[1] for i in first]
        self.trace_queues()
        return batch, dropped

    def train_s(self, batch: list[Group]) -> float:
        """The step's seconds alone (beside a generator it runs slower: Work, rate): the per-step part,
        then every epoch's passes over the batch's tokens, those the ranks share divided among them, the
        monitor's on rank 0 alone (this run's passes over those token_s was for: sim_costs)."""
        c, lc = self.costs.learner, self.cfg.learner
        per_epoch = sum(g.tokens for g in batch) * c.token_s
        return c.step_s + lc.epochs * per_epoch * (self.shared_passes / lc.num_ranks + self.rank0_passes)

    def sync(self):
        """Every engine stops as its mode says, then the weights move; the version is bumped after."""
        mode = self.cfg.generator.sync_mode
        yield simpy.AllOf(self.env, [e.stop_for_sync(mode) for e in self.engines])
        yield self.env.timeout(self.costs.sync.seconds(self.cfg.bucket_mb))

    def driver(self):
        cfg = self.cfg
        self.admit()
        for step in range(cfg.steps):
            t0 = self.env.now
            batch, dropped = yield from self.take_batch(step)
            t1 = self.env.now
            yield Work(self, "learner", self.train_s(batch)).process
            for g in batch:
                g.step = step
                self.pending.pop(g.index, None)
            self.trained += batch
            t2 = self.env.now
            if (step + 1) % cfg.sync_every == 0 and step + 1 < cfg.steps:
                if self.plan.forced:  # the version moves on only once its released tasks are back
                    released = [i for i in self.pending if self.release_version(i) == self.version]
                    yield from self._until(lambda: all(i in self.inbox for i in released))
                yield from self.sync()
                self.version = step + 1
                for e in self.engines:
                    e.resume(self.version)
            t3 = self.env.now
            self.admit()
            if self.costs.learner.overhead_s:  # the driver's bookkeeping: the admitted tasks start meanwhile
                yield self.env.timeout(self.costs.learner.overhead_s)
            self.steps.append({"start": t0, "end": self.env.now, "wait_s": t1 - t0, "train_s": t2 - t1,
                               "sync_s": t3 - t2, "dropped": len(dropped),
                               "generator_busy_s": sum(e.busy_s for e in self.engines),
                               "queue/feeder": len(self.ready),
                               "queue/verifier": len(self.verifiers.queue) + self.verifiers.count,
                               "queue/learner": len(self.inbox)})

    def run(self) -> dict:
        done = self.env.process(self.driver())
        try:
            self.env.run(until=done)
        except RuntimeError as e:  # no event left and the run not over: the model itself is stuck
            raise SimulationStuck(f"simulation stuck at t={self.env.now:.3f}s, step {len(self.steps)}: {e}") from None
        return self.report()

    def timeouts(self) -> list[str]:
        """A learner wait the real driver would not sit through (cluster/driver.py: _with_resend): past
        resend_after_s it re-sends the missing tasks (their generation and checks done twice, the copies
        thrown away: not modelled), past group_timeout_s it stops the run."""
        waits = [(s["wait_s"], k) for k, s in enumerate(self.steps)]
        longest, step = max(waits, default=(0.0, 0))
        out = []
        if longest > self.cfg.group_timeout_s:
            out.append(f"step {step} waited {longest:.0f} s for its groups, past group_timeout_s={self.cfg.group_timeout_s:g}: "
                       "the real run would stop there (RunFailed); these figures are of a run that cannot happen")
        elif longest > self.cfg.resend_after_s:
            out.append(f"step {step} waited {longest:.0f} s for its groups, past resend_after_s={self.cfg.resend_after_s:g}: "
                       "the real driver re-sends the missing tasks then, generating and checking them twice (not "
                       "modelled: raise resend_after_s above the wait)")
        return out

    def queue_maxima(self, t_start: float) -> dict:
        return _queue_maxima(self.queue_trace, t_start)

    def report(self) -> dict:
        cfg, steps = self.cfg, self.steps
        first = WARMUP_STEPS if len(steps) > WARMUP_STEPS else 0
        t_start = steps[first - 1]["end"] if first else 0.0
        wall = steps[-1]["end"] - t_start
        if wall <= 0:
            raise ValueError(f"the timed steps ({WARMUP_STEPS} to {len(steps) - 1}) took no simulated time: every "
                             "stage they waited on costs 0 (give the costs, or more steps)")
        timed = [g for g in self.trained if g.step >= first]
        n = len(steps) - first
        mean = lambda key: sum(s[key] for s in steps[first:]) / n  # noqa: E731
        delta = lambda key: steps[-1][key] - (steps[first - 1][key] if first else 0.0)  # noqa: E731
        stale = Counter(g.step - g.version_start for g in self.trained)
        return {
            "completions_per_s": len(timed) * cfg.generator.group_size / wall,
            "tokens_per_s": sum(g.tokens for g in timed) / wall,
            "groups_per_s": len(timed) / wall,
            "step_s": wall / n,
            "learner_wait_s": mean("wait_s"), "learner_train_s": mean("train_s"), "sync_total_s": mean("sync_s"),
            # over the timed steps, as `jury bench` means it (the warm-up steps cannot be as stale);
            # the distribution below counts every step
            "staleness_mean": sum(g.step - g.version_start for g in timed) / len(timed),
            "staleness": {str(k): stale[k] for k in sorted(stale)},
            # idle as `jury bench` counts it, over the same steps: the learner waiting for groups,
            # a generator with no sequence running, a verifier with no group
            "idle/learner": mean("wait_s") * n / wall,
            "idle/generator": 1 - delta("generator_busy_s") / (wall * len(self.engines)),
            # a check that straddles the timed window counts only its part inside it (a 200 s gate
            # started before the window would otherwise make the idle share negative)
            "idle/verifier": 1 - sum(max(0.0, min(e, t_start + wall) - max(s, t_start))
                                     for s, e in self.verify_spans) / (wall * cfg.num_verifiers),
            # at each step's end, as `jury bench` samples them; and the most at any moment of the timed steps
            "queue/feeder": mean("queue/feeder"), "queue/verifier": mean("queue/verifier"),
            "queue/learner": mean("queue/learner"),
            **self.queue_maxima(t_start),
            "dropped_stale": sum(s["dropped"] for s in steps),
            # groups cancelled at a sync (interrupt), over the run, as the generator counts them (those
            # waiting in the engine's queue too): the phase of generation against the syncs decides
            # it, and with it how stale the interrupt mode's groups are
            "interrupted": sum(e.interrupted for e in self.engines),
            # how much longer each role's work took than alone, over the run (sharing cores)
            "slowdown/learner": self.wall_s["learner"] / self.alone_s["learner"] if self.alone_s["learner"] else 1.0,
            "slowdown/generator": (self.wall_s["generator"] / self.alone_s["generator"]
                                   if self.alone_s["generator"] else 1.0),
            "wall_s": steps[-1]["end"],
            # the settings that put this prediction outside its calibration (outside_calibration)
            "outside_calibration": self.outside_calibration,
            "assumptions": self.assumptions + self.timeouts(),
        }


class SimulationStuck(RuntimeError):
    """No event left and the run not over: a defect of the model (or of costs that stop every stage)."""


QUEUES = ("feeder", "verifier", "learner")  # the order of queue_trace's counts


def _queue_maxima(trace: list, t_start: float) -> dict:
    """The most each queue held at any moment from t_start on (the trace's state at t_start included)."""
    since = [q for q in trace if q[0] >= t_start]
    before = [q for q in trace if q[0] < t_start][-1:]
    states = before + since
    return {f"queue/{name}_max": max((q[k + 1] for q in states), default=0) for k, name in enumerate(QUEUES)}


def simulate(cfg: RunConfig, costs: Costs) -> dict:
    return Simulation(cfg, costs).run()


def table(report: dict) -> str:
    rows = [(k, v) for k, v in report.items() if not isinstance(v, (dict, list))]
    rows.append(("staleness", " ".join(f"{k}:{v}" for k, v in report["staleness"].items())))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v:.4g}" if isinstance(v, float) and math.isfinite(v)
                     else f"{k:<{width}}  {v}" for k, v in rows)


def warn_outside(report: dict):
    """A prediction outside its calibration says so where the user reads it, as do its assumptions."""
    import sys

    if report.get("outside_calibration"):
        print(f"warning: outside the calibration ({'; '.join(report['outside_calibration'])}): the costs were "
              "fitted to a run with other settings, and what they change (the cores' sharing, the cost a token, "
              "the lengths) does not carry (docs/simulate.md)", file=sys.stderr)
    for note in report.get("assumptions", []):
        print(f"note: {note}", file=sys.stderr)


def calibrated(bench_dir: str, base: Costs | None = None, sharing_from: str = "", cores: bool = False,
               fits: dict | None = None) -> Costs:
    """sim_costs.calibrate's costs, with the sharing factors fitted to the calibration run, or to
    the bench's runs `sharing_from` names (sharing_names: "max_staleness=1", several, or "async"
    for all its asynchronous runs; sim_costs.sharing_run): a simulation of each such run then slows
    each role as much as that run measured, and with several the factors are the median of each
    run's (statistics.median: with an even count the mean of the middle two; one asynchronous run
    is a noisy measure of contention on a shared machine: docs/results.md, "Calibrated on each
    repeat in turn"). `cores`: the learner's factor turned into the cores model
    (Sharing.learner_rate) on the bench's machine (bench.json's config.cores, else this machine's),
    which prices other learner threads and engine counts (pooled runs must agree on how long their
    engines spin after decoding: engine_spin_s). `fits`: a dict that keeps each run's fitted
    factors between calls on the same bench (a caller pooling different subsets: sim_predict's
    leave-one-out)."""
    import statistics

    from jury.protocol.config_load import load_run_config

    costs = calibrate(bench_dir, base)
    if sharing_from:
        fits = {} if fits is None else fits
        fitted = []
        for name in sharing_names(bench_dir, sharing_from):
            key = (str(bench_dir), name, costs)
            if key not in fits:
                run_dir, learner_ratio, generator_ratio = sharing_run(bench_dir, name, costs)
                cfg = load_run_config(str(run_dir))
                fits[key] = (run_dir, cfg, fit_sharing(cfg, costs, learner_ratio, generator_ratio))
            fitted.append(fits[key])
        layouts = {(f[2].learner_threads, f[2].generators) for f in fitted}
        if len(layouts) > 1:
            raise ValueError(f"--sharing-from {sharing_from}: its runs differ in learner.threads or num_generators "
                             f"({sorted(layouts)}), and factors of different layouts do not pool")
        _, cfg, first = fitted[0]
        sharing = replace(first, learner=statistics.median(f[2].learner for f in fitted),
                          generator=statistics.median(f[2].generator for f in fitted))
        run_dirs = [f[0] for f in fitted]
    else:
        run_dirs = [calibration_run(bench_dir)]
        cfg = load_run_config(str(run_dirs[0]))
        sharing = fit_sharing(cfg, costs, 1 + costs.sharing.learner, 1 + costs.sharing.generator)
    if cores:
        machine = _bench_report(Path(bench_dir))["config"].get("cores") or machine_cores()
        spins = {engine_spin_s(d) for d in run_dirs}
        if len(spins) > 1:  # one's engines ran the model inline, another's in vLLM's spinning worker
            raise ValueError(f"--sharing-from {sharing_from}: its runs' engines held their cores after decoding "
                             f"for different times ({sorted(spins)} s: engine_inline differs or one run lacks it), "
                             "and one cores model does not price both")
        sharing = with_cores(sharing, machine, cfg.learner.threads, cfg.num_generators, spins.pop())
    return replace(costs, sharing=sharing)


ASYNC_RUNS = "async"  # --sharing-from async: every asynchronous run of the bench
AUTO_SHARING = "auto"  # the command's default: async where the bench has such runs, else the calibration run


def _sharing_from(calibration: str, given: str) -> str:
    """The command's --sharing-from as calibrated() takes it ("" for the calibration run alone). By
    default every asynchronous run of the bench, where it has some: a synchronous run hardly overlaps
    the roles, and factors fitted to it predicted the kept toy bench's asynchronous runs 1.12-1.34x
    their measured throughput (docs/results.md), the median over its asynchronous runs 0.94-1.11x."""
    import sys

    if given == "sync":
        return ""
    if given != AUTO_SHARING:
        return given
    report = _bench_report(Path(calibration))
    if report["config"].get("run_folder"):  # one run: its costs are its own, contention included
        return ""
    runs = asynchronous_runs(calibration)
    if not runs:
        print(f"calibration: {calibration} has no asynchronous run: the sharing factors are fitted to its synchronous "
              "run, whose roles hardly overlap (on a machine where they share cores, an asynchronous run of the same "
              "bench measures how much they slow each other)", file=sys.stderr)
        return ""
    old = [n for n in runs if "loop_start_s" not in report.get(f"end_to_end/{n}", {})]
    if old:  # a bench from before the timed loop's start was reported: no occupancy window to fit to
        print(f"calibration: {calibration} predates the runs' loop_start_s ({old[0]} lacks it): the sharing factors "
              "are fitted to its synchronous run", file=sys.stderr)
        return ""
    return ASYNC_RUNS


def sharing_names(bench_dir: str, sharing_from: str, exclude: tuple[str, ...] = ()) -> list[str]:
    """The bench runs --sharing-from names: one ("max_staleness=1", as `jury bench` names it), several
    separated by semicolons (a name has commas: "max_staleness=4,interrupt"), or "async": every run
    of the bench's own settings (no --arm) whose max_staleness is above 0, under each of its sync
    modes. `exclude`: runs left out (the run a leave-one-out prediction is for). A run the bench
    does not have is refused by sharing_run."""
    names = asynchronous_runs(bench_dir) if sharing_from == ASYNC_RUNS else \
        [n.strip() for n in sharing_from.split(";") if n.strip()]
    names = [n for n in names if n not in exclude]
    if not names:
        why = " but " + ", ".join(exclude) if exclude else " (it has no asynchronous run)" \
            if sharing_from == ASYNC_RUNS else ""
        raise ValueError(f"--sharing-from {sharing_from}: no run of {bench_dir} to fit the sharing to{why}")
    return names


MAX_SHARING = 20.0  # a role overlapping the other a sliver of its time would otherwise fit any factor


def fit_sharing(cfg: RunConfig, costs: Costs, learner_ratio: float, generator_ratio: float,
                rounds: int = 8) -> Sharing:
    """The sharing factors with which a simulation of `cfg` runs each role `ratio` times as long as
    alone (its report's slowdown/learner and slowdown/generator). A role that does a share φ of its
    work beside the other role takes 1 + factor·φ times as long as alone; φ moves with the factors
    (a slower learner overlaps more of the generator's time), so each round simulates and sets
    factor = (ratio - 1) / φ, from φ = 1 (overlapping throughout). A role that never overlaps the
    other in that run keeps ratio - 1: the run says nothing of it."""
    factors = {"learner": learner_ratio - 1, "generator": generator_ratio - 1}
    targets = dict(factors)
    for _ in range(rounds if any(factors.values()) else 0):
        report = simulate(cfg, replace(costs, sharing=Sharing(**factors)))
        for role, target in targets.items():
            overlap = (report[f"slowdown/{role}"] - 1) / factors[role] if factors[role] else 0.0
            if overlap > 1e-3:
                factors[role] = min(target / overlap, MAX_SHARING)
    return Sharing(**factors, learner_threads=cfg.learner.threads, generators=cfg.num_generators)


COMPARED = ("completions_per_s", "tokens_per_s", "step_s", "staleness_mean", "idle/generator", "idle/learner",
            "interrupted")


def against_bench(bench_dir: str, costs: Costs, only: tuple[str, ...] = ()) -> dict[str, dict]:
    """Each end-to-end run of a `jury bench` folder (or those `only` names) simulated from its own
    config.yaml with these costs: run name -> {key: (predicted, measured)} for the keys both report
    (COMPARED)."""
    from jury.experiments.sim_costs import interrupted_groups, run_folder
    from jury.protocol.config_load import load_run_config

    folder = Path(bench_dir)
    report = _bench_report(folder)
    out = {}
    for name, measured in report.items():
        if not name.startswith("end_to_end/") or "run_dir" not in measured or \
                (only and name.removeprefix("end_to_end/") not in only):
            continue
        run_dir = run_folder(folder, measured["run_dir"])
        cfg = load_run_config(str(run_dir))
        predicted = simulate(cfg, costs)
        restarted = interrupted_groups(run_dir) if cfg.generator.sync_mode == "interrupt" else None
        if restarted is not None:  # the groups it started over, from its metrics
            measured = {**measured, "interrupted": restarted}
        out[name.removeprefix("end_to_end/")] = {k: (predicted[k], measured[k]) for k in COMPARED if k in measured}
        if predicted["outside_calibration"]:
            out[name.removeprefix("end_to_end/")]["outside_calibration"] = predicted["outside_calibration"]
    return out


def against_forced_run(run_dir: str) -> dict:
    """A forced-staleness run (`forced_staleness`) simulated from its own config.yaml: each group's
    staleness there against its ledger's. The schedule alone decides it, not the costs, so the model
    must give every group exactly the run's: {"groups", "same", "differ" (indices), "predicted",
    "measured" (staleness -> groups)}."""
    from jury.experiments.staleness import read_ledger
    from jury.protocol.config_load import load_run_config

    cfg = load_run_config(run_dir)
    if not cfg.forced_staleness:
        raise ValueError(f"{run_dir}: not a forced-staleness run (its config has no forced_staleness)")
    sim = Simulation(cfg, Costs())
    sim.run()
    predicted = {g.index: g.step - g.version_start for g in sim.trained}
    measured = {r["index"]: r["staleness"] if "staleness" in r else r["step"] - r["version_start"]
                for r in read_ledger(run_dir)}  # ledgers before the field: from the version
    differ = sorted(i for i in measured.keys() | predicted.keys() if predicted.get(i) != measured.get(i))
    hist = lambda d: {str(k): n for k, n in sorted(Counter(d.values()).items())}  # noqa: E731
    return {"groups": len(measured), "same": len(measured) - sum(i in measured for i in differ), "differ": differ,
            "predicted": hist(predicted), "measured": hist(measured)}


def comparison_table(rows: dict[str, dict]) -> str:
    lines = [f"{'run':<32}" + "".join(f"{k:>24}" for k in COMPARED),
             f"{'':<32}" + f"{'predicted / measured':>24}" * len(COMPARED)]
    for name, values in rows.items():
        cells = [f"{values[k][0]:.3g} / {values[k][1]:.3g}" if k in values else "" for k in COMPARED]
        lines.append(f"{name:<32}" + "".join(f"{c:>24}" for c in cells))
        if values.get("outside_calibration"):
            lines.append(f"{'':<4}outside the calibration: {'; '.join(values['outside_calibration'])}")
    return "\n".join(lines)


def plot_timeline(sim: Simulation, path: Path):
    """In the style of `jury bench`'s occupancy.png, on one time axis: the sequences running in each
    engine, the queues (tasks waiting for an engine, groups at the verifiers, scored groups waiting
    for the learner), the verifiers' busy workers, and what the learner did (waiting for groups,
    training, syncing weights). Beside them: the staleness of the trained groups and the mean step's
    breakdown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(13, 8))
    grid = fig.add_gridspec(4, 2, width_ratios=(3, 1), height_ratios=(3, 2, 1, 1))
    occupancy = fig.add_subplot(grid[0, 0])
    queues = fig.add_subplot(grid[1, 0], sharex=occupancy)
    checking = fig.add_subplot(grid[2, 0], sharex=occupancy)
    learner = fig.add_subplot(grid[3, 0], sharex=occupancy)
    for e in sim.engines:
        if e.trace:
            t, n = zip(*e.trace)
            occupancy.step(t, n, where="post", lw=0.8, label=e.name)
    occupancy.axhline(sim.B * sim.cfg.generator.group_size, color="grey", ls=":", lw=0.8,
                      label="one batch's sequences")
    occupancy.set_ylabel("sequences running")
    occupancy.legend(loc="upper right", fontsize=8)
    trace = sim.queue_trace or [(0.0, 0, 0, 0)]
    t = [q[0] for q in trace]
    for k, (name, label) in enumerate((("feeder", "tasks waiting for an engine"),
                                       ("verifier", "groups at the verifiers"),
                                       ("learner", "scored groups waiting for the learner"))):
        queues.step(t, [q[k + 1] for q in trace], where="post", lw=0.9, label=label)
    queues.set_ylabel("groups")
    queues.legend(loc="upper right", fontsize=8)
    spans = sorted(sim.verify_spans)
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    busy, times, counts = 0, [0.0], [0]
    for at, d in edges:
        busy += d
        times.append(at)
        counts.append(busy)
    checking.step(times, counts, where="post", color="tab:green", lw=0.9)
    checking.set_ylim(0, max(1, sim.cfg.num_verifiers) * 1.15)
    checking.set_ylabel("verifiers\nbusy", fontsize=8)
    for name, color, length in (("wait", "tab:grey", "wait_s"), ("train", "tab:blue", "train_s"),
                                ("sync", "tab:red", "sync_s")):
        bars = []
        for s in sim.steps:
            begin = {"wait": s["start"], "train": s["start"] + s["wait_s"],
                     "sync": s["start"] + s["wait_s"] + s["train_s"]}[name]
            bars.append((begin, s[length]))
        learner.broken_barh(bars, (0, 1), color=color, label=name)
    learner.set_yticks([])
    learner.set_ylabel("learner")
    learner.set_xlabel("simulated seconds")
    learner.legend(loc="upper right", fontsize=8, ncol=3)
    for ax in (occupancy, queues, checking):
        ax.tick_params(labelbottom=False)
    stale = fig.add_subplot(grid[0:2, 1])
    counts = Counter(g.step - g.version_start for g in sim.trained)
    keys = sorted(counts)
    stale.bar([str(k) for k in keys], [counts[k] / max(1, len(sim.trained)) for k in keys], color="tab:purple")
    stale.set_xlabel("staleness (versions)")
    stale.set_ylabel("share of trained groups")
    breakdown = fig.add_subplot(grid[2:4, 1])
    n = max(1, len(sim.steps))
    parts = [("wait", "wait_s", "tab:grey"), ("train", "train_s", "tab:blue"), ("sync", "sync_s", "tab:red")]
    means = [sum(s[key] for s in sim.steps) / n for _, key, _ in parts]
    overhead = sum(s["end"] - s["start"] for s in sim.steps) / n - sum(means)
    labels = [p[0] for p in parts] + ["driver"]
    breakdown.barh(labels, means + [max(0.0, overhead)], color=[p[2] for p in parts] + ["tab:olive"])
    breakdown.invert_yaxis()
    breakdown.set_xlabel("seconds a step (mean)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_command(sub):
    p = sub.add_parser("simulate", help="a discrete-event model of a run: throughput, staleness, idle roles, "
                                        "step-time breakdown, from stage costs (a YAML file or a jury bench folder)")
    p.add_argument("--config", help="the run's YAML config (as jury train takes it)")
    p.add_argument("--costs", default="", help="stage costs YAML (default: configs/simulate/costs.yaml's values)")
    p.add_argument("--calibration", default="", metavar="BENCH_OR_RUN_DIR",
                   help="fit the costs to a jury bench output folder (bench.json and its runs; best: each role "
                        "is also measured alone) or to a finished jury train run folder (its own costs, as it ran)")
    p.add_argument("--sharing-from", default=AUTO_SHARING, metavar="RUN[;RUN...]|async|sync",
                   help="with --calibration: the runs of the bench to fit the sharing factors to (how much "
                        "generation and training slow each other where they share cores). Default: 'async' where "
                        "the bench has asynchronous runs (the median of each one's factors: one run far from the "
                        "others moves it no further than the runs beside it), else the calibration run. A run "
                        "(max_staleness=1, as jury bench names it), several separated by ';', or 'sync' for the "
                        "synchronous calibration run alone (its roles hardly overlap: it says little of contention)")
    p.add_argument("--cores-model", action="store_true",
                   help="with --calibration: slow the learner by its threads' share of the cores the busy "
                        "engines leave (one CPU machine; prices other learner.threads and num_generators) instead "
                        "of by one factor")
    p.add_argument("--compare", action="store_true",
                   help="with --calibration: simulate each end-to-end run of that bench folder from its own config "
                        "and print predicted against measured (it takes no --config or key=value: each run's own)")
    p.add_argument("--hardware", default="", metavar="NAME",
                   help="GPU costs from configs/simulate/hardware.yaml and the model's shape (experiments/sim_gpu.py): "
                        "one card for both roles, or generator=NAME,learner=NAME")
    p.add_argument("--sweep", action="store_true",
                   help="simulate each generator:learner split of --gpus at each --staleness; table and sweep.png")
    p.add_argument("--gpus", type=int, default=None, help="with --sweep: GPUs to split (default: the config's)")
    p.add_argument("--staleness", default="", help="with --sweep: the max_staleness values (default 0,1,2,4)")
    p.add_argument("--splits", default="", help="with --sweep: generator GPU counts (default: each eighth)")
    p.add_argument("--out", default="", help="folder for simulate.json and timeline.png (default runs/simulate-<time>)")
    p.add_argument("overrides", nargs="*", help="key=value config overrides; costs.KEY=VALUE changes a cost (after any "
                                                "calibration); with --hardware model.KEY=VALUE (the shape, or "
                                                "model.params) and efficiency.KEY=VALUE")
    p.set_defaults(func=_main)


def _main(args) -> int:
    import json
    import sys
    import time

    from jury.experiments.sim_costs import load_costs, with_overrides
    from jury.protocol.config_load import load_config

    hw_prefixes = ("model.", "efficiency.")
    cost_overrides = [o.removeprefix("costs.") for o in args.overrides if o.startswith("costs.")]
    hw_overrides = [o for o in args.overrides if o.startswith(hw_prefixes)]
    run_overrides = [o for o in args.overrides if not o.startswith(("costs.", *hw_prefixes))]
    try:
        if hw_overrides and not args.hardware:
            raise ValueError(f"{hw_overrides[0]}: model.* and efficiency.* need --hardware NAME")
        given = [flag for flag, v in (("--gpus", args.gpus), ("--staleness", args.staleness),
                                      ("--splits", args.splits)) if v not in (None, "")]
        if args.gpus is not None and args.gpus < 2:
            raise ValueError(f"--gpus {args.gpus}: at least 2 (one to generate, one to train)")
        if given and not args.sweep:  # not read without it: a plan the user believes swept would not be
            raise ValueError(f"{given[0]} is read only with --sweep")
        if args.sweep and not args.hardware:  # a split of GPUs priced with one CPU machine's costs means nothing
            raise ValueError("--sweep splits GPUs between the roles: give --hardware NAME (the GPU costs)")
        if args.sharing_from != AUTO_SHARING and not args.calibration:
            raise ValueError("--sharing-from needs --calibration BENCH_OR_RUN_DIR")
        if args.cores_model and not args.calibration:
            raise ValueError("--cores-model needs --calibration BENCH_DIR (it is fitted to a bench's run)")
        if args.cores_model and (Path(args.calibration) / "config.yaml").is_file() \
                and not (Path(args.calibration) / "bench.json").is_file():
            raise ValueError("--cores-model needs a bench folder: it is fitted to a run against the learner alone "
                             "(learner_only), which a run folder does not have")
        if args.compare and not args.calibration:
            raise ValueError("--compare needs --calibration BENCH_OR_RUN_DIR")
        if args.compare and (args.config or run_overrides or hw_overrides or args.hardware or args.sweep):
            unused = ["--config"] * bool(args.config) + run_overrides + hw_overrides + \
                ["--hardware"] * bool(args.hardware) + ["--sweep"] * args.sweep
            raise ValueError(f"--compare simulates each bench run from its own config.yaml: it takes no "
                             f"{unused[0]} (costs.KEY=VALUE it does take)")
        cfg = load_config(args.config, run_overrides)
        costs = load_costs(args.costs or None)
        if args.calibration:
            sharing_from = _sharing_from(args.calibration, args.sharing_from)
            costs = calibrated(args.calibration, costs, sharing_from, cores=args.cores_model)
        costs = with_overrides(costs, cost_overrides)
        if args.compare:
            print(f"fitted sharing factors: learner {costs.sharing.learner:.3g}, generator "
                  f"{costs.sharing.generator:.3g} (each at 1/(1+factor) of its alone rate while the other works)")
            if costs.sharing.cores:
                print(f"cores model: {costs.sharing.cores} cores, {costs.sharing.engine_load:.3g} floating cores "
                      "a busy engine (the learner's rate)")
            print(comparison_table(against_bench(args.calibration, costs)))
            return 0
        prepare = _preparer(args.hardware, cfg, costs, hw_overrides)
        if args.sweep:
            return _sweep(args, cfg, prepare)
        cfg, costs = prepare(cfg)
        sim = Simulation(cfg, costs)
        out = Path(args.out or f"runs/simulate-{time.strftime('%Y%m%d-%H%M%S')}")
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out}: a file, not a folder")
        report = sim.run()
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"--out {out}: cannot make the folder ({e.strerror or e})") from None
    except (ConfigError, OSError, ValueError, KeyError, SimulationStuck) as e:
        print(f"jury simulate: {e}", file=sys.stderr)
        return 2
    # per step: its end (simulated seconds), the learner's wait/train/sync and the queue depths then
    # queues: (simulated seconds, tasks waiting for an engine, groups at the verifiers, scored groups
    # waiting for the learner) at each change
    (out / "simulate.json").write_text(json.dumps({"report": report, "steps": sim.steps, "queues": sim.queue_trace,
                                                   "costs": costs.to_dict(),
                                                   "config": args.config, "overrides": args.overrides,
                                                   "max_num_seqs": cfg.generator.max_num_seqs}, indent=2))
    plot_timeline(sim, out / "timeline.png")
    print(table(report))
    warn_outside(report)
    print(f"\n{out / 'simulate.json'}\n{out / 'timeline.png'}")
    return 0


def _preparer(hardware: str, cfg: RunConfig, costs: Costs, overrides: list[str]):
    """(config, colocated) -> (config, costs) for one simulation: as given, or with --hardware the GPU
    formulas' costs for that config's split (`colocated`: the learner on the engines' GPUs, at
    efficiency.colocated_train of its speed), and max_num_seqs no more than the engine's KV cache holds."""
    if not hardware:
        return lambda c, colocated=False: (c, costs)
    import sys

    from jury.experiments.sim_gpu import hardware_costs, hardware_reading, load_hardware, load_model, with_kv_limit

    refused, notes = hardware_reading(cfg)
    if refused:
        raise ConfigError(f"--hardware does not model: {'; '.join(refused)}")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    gpus, model = load_hardware(hardware, overrides=overrides), load_model(cfg.model, overrides=overrides)
    return lambda c, colocated=False: (with_kv_limit(c, model, gpus, costs),
                                       hardware_costs(c, model, gpus, costs, colocated))


def _whole_numbers(flag: str, text: str) -> list[int]:
    try:
        values = [int(k) for k in text.split(",")]
    except ValueError:
        raise ValueError(f"{flag} {text!r}: whole numbers separated by commas, e.g. 0,1,2") from None
    if any(v < 0 for v in values):
        raise ValueError(f"{flag} {text!r}: no negative values")
    return values


def _sweep(args, cfg: RunConfig, prepare) -> int:
    import json
    import time

    from jury.experiments.sim_sweep import plot_sweep, sweep, sweep_table

    total = args.gpus if args.gpus is not None else \
        cfg.num_generators * cfg.generator.tensor_parallel_size + cfg.learner.num_ranks
    staleness = _whole_numbers("--staleness", args.staleness or "0,1,2,4")
    splits = _whole_numbers("--splits", args.splits) if args.splits else None
    rows = sweep(cfg, total, staleness, lambda c, colocated: simulate(*prepare(c, colocated)), splits)
    out = Path(args.out or f"runs/simulate-sweep-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    import sys

    # each point's notes once, with the splits they hold for (a wait past the driver's timeouts is one point's)
    said: dict[str, list[str]] = {}
    for r in rows:
        for note in r["notes"]:
            said.setdefault(note, []).append(f"{r['split']} @ {r['max_staleness']}")
    for note, where in said.items():
        print(f"note: {note}" + ("" if len(where) == len(rows) else f" [{', '.join(where)}]"), file=sys.stderr)
    (out / "sweep.json").write_text(json.dumps({"rows": rows, "gpus": total, "config": args.config,
                                                "hardware": args.hardware, "overrides": args.overrides}, indent=2))
    plot_sweep(rows, out / "sweep.png")
    print(sweep_table(rows))
    print(f"\n{out / 'sweep.json'}\n{out / 'sweep.png'}")
    return 0
