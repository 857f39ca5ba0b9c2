"""`jury train`: the whole program in one function.

    feeder ─PromptTask─► generators ─RolloutGroup─► verifiers ─ScoredGroup─► learner
                                ▲                                               │
                                └──────────── weights, version v+1 ─────────────┘

The driver owns the feeder and the clock: it admits tasks within the staleness
budget, asks the learner for step s, syncs weights every `sync_every` steps (the
version goes up only after every generator acknowledged) and writes metrics.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from jury.protocol.config import ConfigError, RunConfig
from jury.protocol.config_load import dump_config, load_run_config, resume_changes
from jury.protocol.plan import RunPlan, make_plan
from jury.cluster.metrics import JsonlFile, MetricsLog, read_jsonl, read_metrics, stage
from jury.cluster.monitor import Monitor
from jury.cluster.errors import Interrupted, RunFailed
from jury.cluster.evaluation import Evaluator
from jury.cluster.learner_group import LearnerDied
from jury.cluster.pipeline import Pipeline
from jury.data.checks import RunData, check_data, check_prompts
from jury.models.registry import is_local, model_folder, model_positions, resolve_model
from jury.cluster.tracking import Trackers, open_trackers
from jury.learner.checkpoint import CheckpointError, read_checkpoint
from jury.protocol.messages import PromptTask, StepResult

log = logging.getLogger(__name__)
# while a batch is missing, how often the driver looks for a worker that Ray restarted (and then
# re-sends at once what it held): the learner is asked for the batch in slices this long
HEALTH_CHECK_S = 5.0


def preflight(cfg: RunConfig, resume: str | None = None):
    """What can be checked before anything starts (no run folder, no Ray): the paths the config
    names (the data files: data/checks.py; the model folders, the critic's too) and that the model
    takes max_model_len tokens.
    A bad one is a ConfigError naming the field (`jury train` exits 2)."""
    def hf_folder(field: str, value: str):
        if not is_local(value) and not (Path(value) / "config.json").is_file():
            raise ConfigError(f"{field}: {value} is not a Hugging Face model folder (no config.json there)")

    hf_folder("model", cfg.model)
    positions = model_positions(cfg.model)
    if positions and cfg.max_model_len > positions:
        raise ConfigError(f"max_model_len ({cfg.max_model_len}) exceeds the {positions} positions model {cfg.model} "
                          "takes (its max_position_embeddings): vLLM would refuse it at engine start")
    v = cfg.verifier
    for reward, field in (("tinyv", "tinyv_model"), ("llm_judge", "judge_model"), ("llm_kd", "teacher_model"),
                          ("coreward", "rewrite_model")):
        model = getattr(v, field)
        if v.reward == reward and model not in v.llm_endpoints and (reward != "coreward" or v.rewrites == "llm"):
            hf_folder(f"verifier.{field}", model)
    if cfg.derl.enabled:
        hf_folder("derl.model", cfg.derl.model)
    if cfg.learner.critic_model:  # the value model (advantage=gae) is built on every learner rank
        hf_folder("learner.critic_model", cfg.learner.critic_model)
    for field, value in (("checkpoint_dir", cfg.checkpoint_dir), ("run_dir", cfg.run_dir)):
        if value and Path(value).exists() and not Path(value).is_dir():
            raise ConfigError(f"{field}: {value} is a file, not a folder")
    if resume and not Path(resume).is_dir():
        raise ConfigError(f"--resume: {resume} is not a run folder")


def make_run_dir(cfg: RunConfig, path: str | None = None) -> Path:
    path = Path(path or cfg.run_dir or f"runs/{time.strftime('%Y%m%d-%H%M%S')}")
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(dump_config(cfg))
    return path


def train(cfg: RunConfig, resume: str | None = None, plots: Callable[[Path], list] | None = None) -> dict:
    """Run until `cfg.steps` learner steps; returns a summary (also written to the run folder).

    With `resume` (a run folder), the run continues from its last checkpoint: weights,
    optimizer, version, data position; metrics append to the same metrics.jsonl.
    The trackers `cfg.tracking` names get the config, every metrics row, the summary and
    the PNGs `plots(run_dir)` makes (`jury train` passes `jury plot`'s: cluster/ cannot import it).
    """
    preflight(cfg, resume)
    # a resumed run is the run its folder records: only some settings may change (ConfigError otherwise)
    if resume and not (Path(resume) / "config.yaml").is_file():
        raise RunFailed(f"--resume: {resume} has no config.yaml: not a run folder")
    changes = resume_changes(load_run_config(resume), cfg) if resume else {}
    # the data before anything starts: a bad file is refused (DataError) naming file, row and field
    with stage("checking the data", cfg.progress and cfg.dataset != "synthetic"):
        data = check_data(cfg)
    with stage(f"model {cfg.model}", cfg.progress):
        model_path = resolve_model(cfg.model, progress=cfg.progress)
    data = check_prompts(cfg, model_path, data)  # template and chat template on the tokenizer; lengths
    cfg = data.cfg  # steps capped by data.epochs
    # the config resolved once: the window, faults, sampling, each LLM role's server
    plan = make_plan(cfg, resolve=lambda model: model_folder(model, progress=cfg.progress), positions=model_positions)
    state = read_checkpoint_state(resume) if resume else None
    run_dir = make_run_dir(cfg, resume)  # a resumed run records its (possibly changed) config again
    if changes:  # what the resume changed, and from which step
        JsonlFile(run_dir / "resume_changes.jsonl").append(
            [{"step": state["version"], "time": time.time(), "changes": {k: list(v) for k, v in changes.items()}}])
    data.write(run_dir)
    try:
        trackers = open_trackers(cfg, run_dir, state["version"] if state else 0)
    except ImportError as e:
        raise RunFailed(str(e)) from None
    try:
        summary = _train(cfg, plan, run_dir, state, trackers, data)
        trackers.summary(summary)
        if trackers and plots:
            trackers.files(_plots(plots, run_dir))
    except BaseException:
        try:
            trackers.close()  # a tracker that got no summary records the run as failed
        except Exception:  # the run's own error is the one to raise
            log.exception("closing the trackers failed too")
        raise
    trackers.close()
    return summary


def _plots(plots: Callable[[Path], list], run_dir: Path) -> list:
    try:
        return plots(run_dir)
    except Exception:  # the run is done and recorded; a plot is not worth failing it
        log.exception("plots for the trackers failed; `jury plot %s --out DIR` makes them again", run_dir)
        return []


def _train(cfg: RunConfig, plan: RunPlan, run_dir: Path, state: dict | None, trackers: Trackers,
           data: RunData) -> dict:
    elapsed_s = 0.0  # a resumed run's time_s clock goes on from its last kept row's
    if state:  # steps after the checkpoint are trained again: drop their old rows
        for name in ("metrics.jsonl", "ledger.jsonl"):
            truncate_steps(run_dir / name, state["version"])
        kept = read_metrics(run_dir) if (run_dir / "metrics.jsonl").exists() else []
        elapsed_s = float(kept[-1].get("time_s", 0.0)) if kept else 0.0
    t_start = time.time()
    pipe = Pipeline(cfg, state["path"] if state else plan.policy_model, plan=plan,
                    learner_checkpoint=str(Path(state["path"]) / "engine") if state else None,
                    initial_version=state["version"] if state else 0)
    total = cfg.steps * cfg.batch_groups
    metrics, interrupted = None, False
    summary: dict = {"run_dir": str(run_dir)}
    try:
        pipe.start()
        first = pipe.version  # learner steps done before this process started
        if state and plan.admission.continuous:
            pending = [PromptTask(**t) for t in state["pending"]]
            refilled = state.get("refilled", 0)  # dynamic sampling's refills (a checkpoint before them: none)
            pipe.feeder.restore(state["next_index"], state["stream_position"], pending, state["dropped"], refilled)
            pipe.learner.call0("restore_admission", state["next_index"], [t.index for t in pending], state["dropped"],
                               refilled)
        elif state:
            pipe.feeder.fast_forward(state["next_index"], state["stream_position"])
            if pipe.feeder.forced and max(pipe.feeder.forced) > 0:
                log.warning("forced_staleness on a resumed run: the batches the run had released before its "
                            "checkpoint (up to %d after version %d) are generated again at version %d, the "
                            "policies they were released at not being in the checkpoint: their groups are "
                            "fresher than forced, as the ledger's staleness records", max(pipe.feeder.forced) - 1,
                            pipe.version, pipe.version)
        if cfg.record_groups:
            pipe.learner.call0("record", str((run_dir / "record").resolve()))
        evaluator = Evaluator.from_config(cfg, pipe.feeder.prompts, pipe.feeder.tokenizer) if cfg.eval.every else None
        summary["startup_s"] = time.time() - t_start
        metrics = MetricsLog(run_dir, cfg.steps, cfg.progress, initial=first, trackers=trackers, elapsed_s=elapsed_s)
        ledger = JsonlFile(run_dir / "ledger.jsonl")
        monitor = Monitor(cfg.monitor) if cfg.monitor.enabled else None
        if monitor and state:  # a resumed run's monitor starts from the steps its folder holds
            for old in read_metrics(run_dir):
                monitor.observe(old["step"], dict(old))
        for f in plan.faults:  # the first step's faults hit before its tasks go out: slow@0 slows every task
            if f.step == first:
                pipe.inject(f)
        pipe.feeder.admit(pipe.version, stop_at=total)
        last, checkpoint_failed = time.perf_counter(), None
        for step in range(first, cfg.steps):
            for f in plan.faults:
                if f.step == step and step > first:
                    pipe.inject(f)
            result = _learner_step(pipe, step)
            row = result.row()
            ledger.append([dataclasses.asdict(entry) for entry in result.ledger])
            if (step + 1) % cfg.sync_every == 0 and step + 1 < cfg.steps:
                if pipe.feeder.forced:  # the version moves on only once its released tasks are back
                    row.update(_with_resend(pipe, step, lambda timeout_s: pipe.learner.hold(
                        pipe.feeder.released_at(pipe.version), timeout_s)).metrics)
                row.update(pipe.sync_weights_or_recover())
            if plan.admission.continuous:  # the first B scored (with signal): consumed in no fixed order
                pipe.feeder.consumed_indices([entry.index for entry in result.ledger] + result.filtered)
            else:
                pipe.feeder.consumed((step + 1) * plan.slots.per_batch)
            if pipe.derl:  # DeRL: correct CoTs into the plan store before the next tasks are mixed
                row.update(pipe.derl.after_step(result))
            if pipe.rewriter:  # CoReward: finished rewrites in before the next tasks are admitted
                row.update(pipe.rewriter.after_step())
            pipe.feeder.admit(pipe.version, stop_at=total)
            if evaluator and evaluator.due(step):  # after the sync: the engines hold the new weights
                row.update(evaluator.run(pipe.generators, pipe.version, cfg.generator.max_new_tokens,
                                         cfg.sync_timeout_s + cfg.group_timeout_s))
            now = time.perf_counter()
            row.update({"perf/step_s": now - last, "perf/tokens_per_s": row["rollout/tokens"] / (now - last),
                        "generator/version": pipe.version})
            row.update(pipe.role_stats())
            row.update(data.metrics())
            last = now
            if checkpoint_failed is not None:  # the last save's outcome, in the row after it
                row["checkpoint/failed"], checkpoint_failed = checkpoint_failed, None
            if monitor:  # a warning line per signal of reward hacking that starts here
                for line in monitor.observe(step, row):
                    metrics.say(line)
            # the row before the checkpoint: a driver killed during the save (the learner may still
            # commit it) must not lose the metrics of a step the checkpoint holds
            metrics.log(step, row)
            if cfg.checkpoint_every and (step + 1) % cfg.checkpoint_every == 0 and step + 1 < cfg.steps:
                checkpoint_failed = float(save_checkpoint(pipe, run_dir, step + 1) is None)
        summary.update(pipe.role_stats())
        summary.update(data.metrics())
        if monitor:
            summary.update(monitor.summary())
        _write_occupancy(pipe, run_dir, metrics.t0)
        # samples whose check ended in "error" (none should, short of pathological answers)
        summary["error_samples"] = sum(v for k, v in summary.items() if k.endswith("/verdict_error"))
        summary["final_checkpoint"] = save_checkpoint(pipe, run_dir, cfg.steps, final=True)
    except KeyboardInterrupt as e:
        interrupted = True
        raise Interrupted(f"{interrupted_by(e)}; every actor was stopped. {resume_hint(run_dir)}") from None
    finally:
        if metrics:
            metrics.close()
            ledger.close()
        pipe.close(graceful=not interrupted)
    # a resumed run's: this process's, plus the time_s its checkpoint's last step had (the earlier
    # processes' start-ups and their time after that step are not counted)
    summary["wall_s"] = time.time() - t_start + elapsed_s
    summary.update(_learning_summary(run_dir))
    (run_dir / "summary.yaml").write_text(yaml.safe_dump(summary, sort_keys=False))
    return summary


def _write_occupancy(pipe: Pipeline, run_dir: Path, t0: float):
    """occupancy.json: each generator engine's sequences running and waiting over the run, in
    bins (actors/occupancy.py), times in seconds on metrics.jsonl's `time_s` clock."""
    import ray

    out: dict = {"clock": "time_s of metrics.jsonl", "max_num_seqs": pipe.cfg.generator.max_num_seqs,
                 "generators": {}}
    for i, g in enumerate(pipe.generators):
        try:
            timeline = ray.get(g.occupancy_timeline.remote(t0), timeout=30)
        except Exception as e:  # restarting: its timeline restarted with it anyway
            log.warning("occupancy: generator%d did not answer (%s); left out of occupancy.json", i, e)
            continue
        timeline["t"] = [round(t - t0, 3) for t in timeline["t"]]
        out["generators"][f"generator{i}"] = timeline
    (run_dir / "occupancy.json").write_text(json.dumps(out))


def _learner_step(pipe: Pipeline, step: int) -> StepResult:
    """One learner step; while groups are missing, repair restarted workers and re-send them; while
    the learner asks for refills (dynamic sampling), admit them (inside the budget: the learner
    asks only for batch `step`'s refill slots, learner/dynamic.py)."""
    t0 = time.perf_counter()
    while True:
        before = time.perf_counter() - t0  # the earlier rounds: learner/wait_s is the whole wait
        result = _with_resend(pipe, step, lambda timeout_s: pipe.learner.step(step, timeout_s))
        if not result.refill:
            if "learner/wait_s" in result.metrics:
                result.metrics["learner/wait_s"] += before
            return result
        if pipe.plan.admission.continuous:  # flat groups: each frees its place for a new task
            pipe.feeder.refill_places(result.refill)
            pipe.feeder.admit(pipe.version, stop_at=pipe.cfg.steps * pipe.cfg.batch_groups)
        else:
            pipe.feeder.admit_refills(result.refill, pipe.version)


def _with_resend(pipe: Pipeline, step: int, call) -> StepResult:
    """call(timeout_s) until nothing is missing. The learner is asked in slices of HEALTH_CHECK_S:
    between two, a worker that Ray restarted is wired back in, and every task the learner lacks is
    re-sent then (Pipeline.recover), not after resend_after_s. With every worker up, what is still
    missing after resend_after_s is re-sent (a group lost some other way)."""
    import ray

    cfg, waited, since_resend, t0 = pipe.cfg, 0.0, 0.0, time.perf_counter()
    while True:
        ask = min(HEALTH_CHECK_S, cfg.resend_after_s - since_resend)
        before = time.perf_counter() - t0  # the earlier slices (and repairs) of this wait
        try:
            result = call(ask)
        except LearnerDied as e:
            raise RunFailed(f"step {step}: {e}") from None
        if result.dropped:  # continuous admission: too stale to train; new tasks take their places
            if not pipe.feeder.dropped:
                log.warning("step %d: %d group(s) overtaken until past max_staleness=%d, dropped (over_budget=drop); "
                            "the overtaken are the long ones, so the trained lengths are biased short: watch "
                            "learner/stale_dropped, or use over_budget=train or sync_mode=interrupt (README, "
                            "Continuous admission)", step, len(result.dropped), cfg.max_staleness)
            pipe.feeder.drop(result.dropped)
            pipe.feeder.admit(pipe.version, stop_at=cfg.steps * cfg.batch_groups)
        if not result.missing:  # the learner timed its last slice: the wait is all of them
            for key in ("learner/wait_s", "learner/hold_s"):
                if key in result.metrics:
                    result.metrics[key] += before
            return result
        waited, since_resend = waited + ask, since_resend + ask
        if waited >= cfg.group_timeout_s:
            raise RunFailed(f"step {step}: groups {result.missing} never arrived in {waited:.0f}s, "
                            f"even after re-sending; is a worker down for good?")
        try:
            repaired = pipe.recover()  # re-sends what the learner lacks when it repaired a worker
        except ray.exceptions.RayActorError as e:
            raise RunFailed(f"step {step}: a worker is down for good (restarts used up?): {e}") from None
        except RunFailed as e:  # a worker frozen, a sync that timed out: it names the worker
            raise type(e)(f"step {step}: {e}") from None
        if repaired:
            since_resend = 0.0
        elif since_resend >= cfg.resend_after_s:
            resent = pipe.feeder.resend(result.missing)
            since_resend = 0.0
            log.warning("step %d: %d groups missing after %.0fs with every worker up; re-sent %d",
                        step, len(result.missing), cfg.resend_after_s, resent)


def save_checkpoint(pipe: Pipeline, run_dir: Path, version: int, final: bool = False) -> str | None:
    """Weights (for generators and `jury eval`), DeepSpeed state, version and data position, written
    whole or not at all (learner/checkpoint.py). A periodic save that fails is reported and the run
    goes on (the last good checkpoint stays, and `--resume` uses it); a final one stops the run."""
    import ray

    base = Path(pipe.cfg.checkpoint_dir).resolve() if pipe.cfg.checkpoint_dir else run_dir.resolve()
    path = base / ("final" if final else "checkpoint")
    if pipe.plan.admission.continuous:  # consumed in no fixed order: the pending tasks themselves
        state = {"version": version, "next_index": pipe.feeder.admitted, "stream_position": pipe.feeder.drawn,
                 "pending": [dataclasses.asdict(t) for t in pipe.feeder.pending.values()],
                 "dropped": pipe.feeder.dropped, "refilled": pipe.feeder.refilled}
    else:
        next_index = version * pipe.plan.slots.per_batch
        state = {"version": version, "next_index": next_index, "stream_position": pipe.feeder.position_of(next_index)}
    state.update({"hf": str(path), "engine": str(path / "engine")})
    try:
        pipe.learner.save(str(path), state)
    except ray.exceptions.RayTaskError as e:
        cause = e.cause if isinstance(e.cause, CheckpointError) else e
        if final:  # the learner saw only `path`: say where the last good periodic checkpoint is
            said = str(cause)
            if isinstance(cause, CheckpointError):
                said = said.rsplit("; ", 1)[0]
            raise RunFailed(f"the final checkpoint could not be written: {said}; {_last_good(run_dir)}") from None
        log.error("%s; training goes on", cause)
        return None
    learner_node = pipe.learner.call0("node")
    if learner_node != ray.util.get_node_ip_address() and not pipe.cfg.checkpoint_dir:
        log.warning("checkpoint written on the learner's node %s at %s, not beside this run's metrics; "
                    "set checkpoint_dir to a path every node shares", learner_node, path)
    _write_atomically(run_dir / "latest_checkpoint", json.dumps({"path": str(path)}))
    return str(path)


def _last_good(run_dir: Path) -> str:
    """Where `--resume` would start from, said as a clause of an error message."""
    try:
        path = json.loads((run_dir / "latest_checkpoint").read_text())["path"]
    except (OSError, ValueError, KeyError):
        return "there is no earlier checkpoint: a resume starts from the beginning"
    return f"the last good checkpoint is {path} (--resume {run_dir} starts there)"


def _write_atomically(path: Path, text: str):
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def truncate_steps(path: Path, first_step: int):
    """Keep only the rows of a JSONL file with step < first_step (a crash may have left later ones,
    or half of one: read_jsonl skips it)."""
    if not path.exists():
        return
    rows = read_jsonl(path)
    keep = [r for r in rows if r["step"] < first_step]
    if len(keep) != len(rows) or not path.read_bytes().endswith(b"\n") and path.stat().st_size:
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in keep), encoding="utf-8")
        tmp.replace(path)


def read_checkpoint_state(run_dir: str) -> dict:
    """The state of the run's last checkpoint, refused unless the checkpoint is whole (RunFailed,
    saying why). A corrupt last checkpoint is moved aside (.NAME.corrupt) and the previous one,
    whole, takes its place, with a line that says so."""
    pointer = Path(run_dir) / "latest_checkpoint"
    if not pointer.exists():
        raise RunFailed(f"{run_dir}: no checkpoint to resume from (no latest_checkpoint file)")
    text = pointer.read_text().strip()
    where = json.loads(text) if text.startswith("{") else {"path": text}  # runs before the manifest: a bare path
    try:
        state = read_checkpoint(where["path"])
    except CheckpointError as e:
        raise RunFailed(f"cannot resume {run_dir}: {e}") from None
    if "fallback" in state:
        path, prev = Path(where["path"]), Path(state["path"])
        aside = path.with_name(f".{path.name}.corrupt")
        shutil.rmtree(aside, ignore_errors=True)
        if path.exists():
            os.replace(path, aside)
        os.replace(prev, path)
        state["path"] = str(path)
        print(f"jury train: {state['fallback']}; resuming from the previous checkpoint, step {state['version']} "
              f"(the corrupt one is kept at {aside})", file=sys.stderr, flush=True)
    return state


def interrupted_by(e: KeyboardInterrupt) -> str:
    return f"interrupted by {e.args[0]}" if e.args and isinstance(e.args[0], str) and e.args[0] else "interrupted"


def resume_hint(run_dir: Path) -> str:
    """Whether a checkpoint exists to resume from, for the line an interrupted run prints."""
    pointer = Path(run_dir) / "latest_checkpoint"
    try:
        text = pointer.read_text().strip()
        state = read_checkpoint(json.loads(text)["path"] if text.startswith("{") else text)
    except (CheckpointError, OSError, ValueError, KeyError):
        return f"No checkpoint to resume from in {run_dir} (checkpoint_every=N saves one every N steps)."
    return f"Resume from step {state['version']}: jury train --resume {run_dir}"


def _learning_summary(run_dir: Path) -> dict:
    rows = read_metrics(run_dir)
    if not rows:
        return {}
    k = max(1, len(rows) // 5)

    def values(key, part):  # a step dynamic sampling skipped trained nothing: nan, left out
        return [r[key] for r in part if not math.isnan(r.get(key, math.nan))]

    def mean(key, part):
        found = values(key, part)
        return sum(found) / len(found) if found else math.nan

    return {"steps": len(rows),
            "reward_first_fifth": mean("reward/mean", rows[:k]), "reward_last_fifth": mean("reward/mean", rows[-k:]),
            "pass_rate_first_fifth": mean("reward/pass_rate", rows[:k]),
            "pass_rate_last_fifth": mean("reward/pass_rate", rows[-k:]),
            "max_staleness_seen": max(values("staleness/max", rows), default=math.nan)}
