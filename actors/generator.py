"""Generator actor: a vLLM AsyncLLM engine in a Ray actor.

    loop:  task = tasks.get()                  # PromptTask, ZeroMQ PULL from the feeder
           group = await generate(task)        # G samples, behaviour log-probs, versions
           rollouts.send(group)                # RolloutGroup, ZeroMQ PUSH to verifiers

A CoReward task carries a rewrite of its prompt: it gets G samples of each, marked by
`Sample.view`, in one group. Many tasks are in flight at once (the engine batches them). `update_weights` stops
taking new tasks, then by `sync_mode`: lets the ones in flight finish ("drain": every
group comes from one version), aborts them and generates them again after the swap
("interrupt": likewise, sooner), or swaps under them ("inflight": the engine applies
the load between two of its steps, so a group may span two versions, as its
version_start and version_end record, and each token carries the version vLLM itself
labelled it with). Then it loads the new weights through the worker extension and resumes.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time

import numpy as np

from jury.actors.cpu_engine import cpu_engine_layout, stop_grace_s
from jury.actors.occupancy import Occupancy, stat_logger
from jury.protocol.config import GeneratorConfig
from jury.protocol.messages import PromptTask, RolloutGroup, Sample, WeightUpdate
from jury.protocol.transport import Receiver, Sender

log = logging.getLogger(__name__)
ENGINE_CHECK_S = 1.0  # how often the generator looks at its engine's health


class Generator:
    def __init__(self, cfg: GeneratorConfig, model_path: str, actor_id: str, seed: int, max_model_len: int,
                 initial_version: int = 0):
        from vllm.engine.arg_utils import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        from jury.protocol.reaper import start_reaper

        # before the engine starts its processes: they end with this actor, however it ends (a
        # frozen generator killed at the end of a run, a driver killed with -9)
        self._reaper = start_reaper()
        self.cfg, self.actor_id = cfg, actor_id
        self.version = self._initial_version = initial_version  # the version of the weights in model_path
        self._slow_s, self._fault = 0.0, ""
        args = AsyncEngineArgs(
            model=model_path,
            dtype=cfg.dtype,
            max_model_len=max_model_len,
            seed=seed,
            enforce_eager=cfg.enforce_eager,
            max_num_seqs=cfg.max_num_seqs,
            logprobs_mode="processed_logprobs",  # log-probs of the distribution actually sampled
            worker_extension_cls="jury.actors.weight_sync.WeightReceiver",
            disable_log_stats=True,
            tensor_parallel_size=cfg.tensor_parallel_size,
            gpu_memory_utilization=cfg.gpu_memory_utilization,  # on GPUs; the CPU build sizes by kv_cache_gib
            # TP on GPUs: workers are Ray actors in this actor's placement group (see Pipeline)
            **({"distributed_executor_backend": "ray"} if cfg.tensor_parallel_size > 1 and cfg.num_gpus > 0 else {}),
        )
        self.occupancy = Occupancy()  # sequences running per engine step (actors/occupancy.py)
        with cpu_engine_layout(cfg.tensor_parallel_size) as layout:  # on the CPU: the model inside the engine core
            self.engine = AsyncLLM.from_engine_args(args, stat_loggers=[stat_logger(self.occupancy)])
        self._idle = asyncio.Event()
        self._idle.set()
        self._open = asyncio.Event()  # cleared while weights are being swapped
        self._open.set()
        self._in_flight = 0
        self._slots = asyncio.Semaphore(cfg.max_tasks_in_flight)
        # one entry per generation in flight (a task re-sent after a crash may be here twice, so the
        # key is a counter, not the task id); "interrupt" cancels them
        self._running: dict[int, asyncio.Task] = {}
        self._spawned = 0
        self._interrupting = False
        self._retry: list[PromptTask] = []
        self._stats = {"groups": 0, "samples": 0, "tokens": 0, "refused": 0, "interrupted": 0, "generate_s": 0.0,
                       "pause_s": 0.0, "busy_s": 0.0,
                       "engine_inline": int(layout.inline),  # 1: the model in the engine core (cpu_engine.py)
                       "engine_forked": int(layout.forked)}  # 1: that engine core forked from this actor
        self._busy_since = None
        self._loop_task = self._engine_watch = None
        self.tasks = self.rollouts = None

    async def start(self, task_endpoint: str, rollout_endpoints: list[str], curve=None, closed: bool = False) -> str:
        """Connect to the feeder and the verifiers and take tasks. `closed`: take none until the first
        weight sync opens the generator (a restarted actor holds the run's starting weights, which
        the tasks the feeder has queued meanwhile must not be sampled from)."""
        if closed:
            self._open.clear()
        self.tasks = Receiver(connect=[task_endpoint], hwm=4, maxsize=4, name=f"{self.actor_id}-tasks", curve=curve,
                              accept=(PromptTask,))
        self.rollouts = Sender(rollout_endpoints, hwm=256, maxsize=256, name=f"{self.actor_id}-rollouts",
                               curve=curve)
        self._loop_task = self._watched(self._loop())
        self._engine_watch = self._watched(self._watch_engine())
        return self.actor_id

    async def _watch_engine(self):
        """vLLM's engine core is a process of its own: if it dies (killed, out of memory) this actor
        would live on with an engine that answers nothing. Fail the actor instead, so that Ray
        restarts it and the driver re-sends its groups."""
        while True:
            if self.engine.errored:
                raise RuntimeError(f"{self.actor_id}: the vLLM engine core is dead")
            await asyncio.sleep(ENGINE_CHECK_S)

    def _watched(self, coro) -> asyncio.Task:
        """A task whose failure fails the actor: Ray sees it die and restarts it, and the driver's
        recovery re-sends its groups. An exception that stayed inside a task would leave an actor
        that answers health checks and generates nothing."""
        task = asyncio.create_task(coro)
        task.add_done_callback(self._check_task)
        return task

    def _check_task(self, task: asyncio.Task):
        if task.cancelled() or task.exception() is None:
            return
        self._die("a task of its loop died", task.exception())

    def _die(self, why: str, exc: BaseException | None = None):
        log.critical("%s: %s; the actor exits so that Ray restarts it", self.actor_id, why, exc_info=exc)
        _exit_actor(self.engine)

    async def _loop(self):
        await self.tasks.serve_async(self._take)  # until stop() wakes the queue

    async def _take(self, task: PromptTask):
        await self._open.wait()
        await self._injected_fault()
        await self._slots.acquire()
        # A sync that began while the task waited for a slot (all max_tasks_in_flight taken) freed
        # that slot by draining or cancelling a group: the task waits out the sync too, or it would
        # start on the old weights while the new ones load (drain and interrupt have no group then)
        while not self._open.is_set():
            self._slots.release()
            await self._open.wait()
            await self._slots.acquire()
        self._begin()
        self._spawn(task)

    def _spawn(self, task: PromptTask):
        key, self._spawned = self._spawned, self._spawned + 1
        job = self._watched(self._generate(task, key))
        self._running[key] = job
        job.add_done_callback(lambda job: self._never_started(job, task, key))

    def _never_started(self, job: asyncio.Task, task: PromptTask, key: int):
        """A generation cancelled before its first step (an interrupt sync right after it was spawned)
        never entered _generate, whose `finally` gives back its slot: without this the sync would
        wait for it until sync_timeout_s and the task would be lost. Its key still being here says
        so (_generate pops it); it is retried like any interrupted group."""
        if self._running.pop(key, None) is None:
            return
        if job.cancelled() and self._interrupting:
            self._retry.append(task)
        self._end()

    def _begin(self):
        if self._in_flight == 0:
            self._busy_since = time.perf_counter()
        self._in_flight += 1
        self._idle.clear()

    def _end(self):
        self._in_flight -= 1
        self._slots.release()
        if self._in_flight == 0:
            self._stats["busy_s"] += time.perf_counter() - self._busy_since
            self._idle.set()

    async def _generate(self, task: PromptTask, key: int):
        try:
            group = await self.generate(task)
        except asyncio.CancelledError:
            if not self._interrupting:
                raise
            self._retry.append(task)  # cancelling aborts the engine request; generated again on the new weights
            return
        except Exception as e:  # a refused prompt still answers, so the learner never waits for it
            if self.engine.errored:  # not a refusal: the engine is gone
                self._die("the vLLM engine core is dead (a generation failed)", e)
            log.warning("%s: task %s refused: %s", self.actor_id, task.task_id, e)
            self._stats["refused"] += 1
            group = RolloutGroup(task=task, prompt_ids=np.zeros(0, np.int32), samples=[],
                                 version_start=self.version, version_end=self.version,
                                 actor_id=self.actor_id, generate_s=0.0, error=f"{type(e).__name__}: {e}",
                                 t_generated=time.time())
        finally:
            self._running.pop(key)
            self._end()
        await asyncio.to_thread(self.rollouts.send, group)

    async def generate(self, task: PromptTask) -> RolloutGroup:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        params = SamplingParams(
            n=self.cfg.group_size,
            output_kind=RequestOutputKind.FINAL_ONLY,  # one output holding all G completions
            temperature=self.cfg.temperature,
            top_p=self.cfg.top_p,
            max_tokens=task.max_new_tokens or self.cfg.max_new_tokens,
            logprobs=0,  # the sampled token's own log-prob only
            min_tokens=min(self.cfg.min_new_tokens, task.max_new_tokens or self.cfg.max_new_tokens),
        )
        version_start, t0 = self.version, time.perf_counter()
        request_id = f"{task.task_id}-{self.actor_id}-{t0}"
        # CoReward: G samples of the rewrite beside the G of the prompt, one request each, side by side
        views = [task.prompt] + ([task.rewrite] if task.rewrite is not None else [])
        answered = await asyncio.gather(*(self._generate_view(p, params, f"{request_id}-v{v}")
                                          for v, p in enumerate(views)))
        samples = []
        for v, (_, view_samples) in enumerate(answered):
            for s in view_samples:
                s.view = v
            samples += view_samples
        if len(samples) != self.cfg.group_size * len(views):
            raise RuntimeError(f"engine returned {len(samples)} of {self.cfg.group_size} x {len(views)} samples")
        dt = time.perf_counter() - t0
        self._stats["groups"] += 1
        self._stats["samples"] += len(samples)
        self._stats["tokens"] += sum(len(s.token_ids) for s in samples)
        self._stats["generate_s"] += dt
        rewrite_ids = answered[1][0] if len(answered) > 1 else []
        version_start, version_end = group_versions(samples, version_start, self.version)
        return RolloutGroup(task=task, prompt_ids=np.asarray(answered[0][0], np.int32), samples=samples,
                            version_start=version_start, version_end=version_end, actor_id=self.actor_id,
                            generate_s=dt, t_generated=time.time(),
                            rewrite_prompt_ids=np.asarray(rewrite_ids, np.int32))

    async def _generate_view(self, prompt: str, params, request_id: str) -> tuple[list[int], list[Sample]]:
        """G samples of one prompt: its token ids and the samples."""
        if self.cfg.sync_mode == "inflight":
            return await self._generate_streamed(prompt, params.clone(), request_id)
        final = None
        async for out in self.engine.generate(await render(self.engine, {"prompt": prompt}), params,
                                              request_id=request_id):
            final = out
        return final.prompt_token_ids, [_sample(c) for c in final.outputs]

    async def _generate_streamed(self, prompt: str, params, request_id: str) -> tuple[list[int], list[Sample]]:
        """Inflight mode: token deltas as the engine makes them. Each token's version is the label
        vLLM attached to the engine step that sampled it (the final output's weight_versions
        spans): update_weights sets it while the engine is paused between two steps, so it is
        exact, also under async scheduling, where a step is scheduled before the previous one's
        outputs arrive. Stamping on receipt instead was late by the steps in flight."""
        from vllm.sampling_params import RequestOutputKind

        params.output_kind = RequestOutputKind.DELTA
        n = params.n
        ids, lps, versions = [[] for _ in range(n)], [[] for _ in range(n)], [[] for _ in range(n)]
        text, finish = [[] for _ in range(n)], ["abort"] * n
        prompt_ids = None
        async for out in self.engine.generate(await render(self.engine, {"prompt": prompt}), params,
                                              request_id=request_id):
            prompt_ids = prompt_ids or out.prompt_token_ids
            for c in out.outputs:
                i, new = c.index, list(c.token_ids)
                ids[i] += new
                lps[i] += [row[t].logprob for row, t in zip(c.logprobs, new)] if c.logprobs else [0.0] * len(new)
                versions[i] += [self.version] * len(new)
                text[i].append(c.text)
                if c.finish_reason:
                    finish[i] = str(c.finish_reason)
                if c.weight_versions:  # on the final output: [start, end) token spans per label
                    versions[i] = self._token_versions(c.weight_versions, len(ids[i]))
        samples = [Sample(token_ids=np.asarray(ids[i], np.int32), logprobs=np.asarray(lps[i], np.float32),
                          text="".join(text[i]), finish_reason=finish[i],
                          token_versions=np.asarray(versions[i], np.int32)) for i in range(n)]
        return list(prompt_ids or []), samples

    def _token_versions(self, spans, n: int) -> list[int]:
        """vLLM's WeightVersionSpans as one version per token; "default" is the engine's label before
        the first sync set one: the weights it started with."""
        out = [self._initial_version] * n
        for span in spans:
            version = self._initial_version if span.version == "default" else int(span.version)
            out[span.start:span.end] = [version] * (span.end - span.start)
        return out

    async def evaluate(self, prompts: list[str], n: int, temperature: float,
                       max_tokens: int, top_p: float = 1.0) -> tuple[list[list[str]], int]:
        """n completions of each prompt at the weights this engine holds, beside the task queue
        (evaluation during training: no task, so no staleness accounting); and the tokens made.
        A prompt the engine refuses gets n empty completions (graded as no answer)."""
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        async def one(i: int, prompt: str) -> tuple[list[str], int]:
            # no per-request seed: vLLM's CPU build fails the engine on one ("CPU Generator does not use
            # offset"); the engine's own seed makes a run's evaluations reproducible
            params = SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                                    output_kind=RequestOutputKind.FINAL_ONLY)
            final = None
            try:
                async for out in self.engine.generate(await render(self.engine, {"prompt": prompt}), params,
                                                      request_id=f"eval-{self.actor_id}-{time.perf_counter()}-{i}"):
                    final = out
            except Exception as e:
                if self.engine.errored:
                    raise
                log.warning("%s: an evaluation prompt was refused: %s", self.actor_id, e)
                return [""] * n, 0
            return [c.text for c in final.outputs], sum(len(c.token_ids) for c in final.outputs)

        results = await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts)))
        return [texts for texts, _ in results], sum(k for _, k in results)

    async def init_weight_group(self, host: str, port: int, world_size: int, first_rank: int, backend: str,
                                timeout_s: float = 300.0):
        """Join the learner's weight group; engine worker k (tensor-parallel rank) takes first_rank + k.
        Returns each worker's {"rank", "dtype"} (the dtype its model holds)."""
        return await self.engine.collective_rpc(
            "jury_init_weight_group", args=(host, port, world_size, first_rank, backend, timeout_s))

    async def abort_weight_group(self) -> list[bool]:
        """Abort the workers' weight group (recovery forms a new one): one still in a broadcast
        whose peer died returns from it."""
        return await self.engine.collective_rpc("jury_abort_weight_group")

    async def update_weights(self, update: WeightUpdate) -> dict:
        """Drain, receive the broadcast, load, resume. Returns timings for the metrics.

        A dead engine fails the actor here, before and after the receive: an acknowledgement
        from an actor whose engine is gone would let the version move on without it."""
        if self.engine.errored:
            self._die("the vLLM engine core is dead (at the start of a weight sync)")
        t0 = time.perf_counter()
        self._open.clear()
        if self.cfg.sync_mode == "drain":
            await self._idle.wait()
        elif self.cfg.sync_mode == "interrupt":
            self._interrupting = True
            for t in list(self._running.values()):
                t.cancel()  # AsyncLLM aborts a cancelled request in the engine
            await self._idle.wait()
            self._interrupting = False
        t1 = time.perf_counter()
        if self.cfg.sync_mode == "inflight":
            # no engine step between the load and the new label: the running requests are frozen
            # (vLLM's "keep"; under async scheduling it also waits for the step in flight)
            await self.engine.pause_generation(mode="keep", clear_cache=False)
        try:
            acks = await self.engine.collective_rpc(
                "jury_receive_weights",
                args=(update.version, update.names, update.dtypes, update.shapes, update.buckets))
            await self.engine.update_weight_version(str(update.version))  # labels every output from now on
            await self._reset_prefix_cache()
        except Exception:
            if self.engine.errored:
                self._die("the vLLM engine core is dead (during a weight sync)")
            raise
        finally:
            if self.cfg.sync_mode == "inflight":
                await self.engine.resume_generation()
        self.version = update.version
        for task in self._retry:  # interrupted groups start over on the new weights
            await self._slots.acquire()
            self._begin()
            self._spawn(task)
        self._stats["interrupted"] += len(self._retry)
        self._retry = []
        self._open.set()
        pause = time.perf_counter() - t0
        self._stats["pause_s"] += pause
        return {"version": self.version, "drain_s": t1 - t0, "pause_s": pause,
                "recv_s": max(a["recv_s"] for a in acks), "load_s": max(a["load_s"] for a in acks),
                "peak_buckets": max(a["peak_buckets"] for a in acks)}

    async def _reset_prefix_cache(self):
        """Cached KV was computed by the old weights. vLLM refuses the reset while requests hold
        KV blocks (inflight's frozen requests, an evaluation beside the task queue) and says so only
        by returning False; new requests would then reuse the old KV. So those requests are
        preempted instead: they resume with their KV recomputed under the new weights (the tokens
        they already have keep their version and log-probs)."""
        if await self.engine.reset_prefix_cache():
            return
        if not await self.engine.reset_prefix_cache(reset_running_requests=True):
            raise RuntimeError(f"{self.actor_id}: vLLM could not reset its prefix cache after a weight sync, even "
                               "with the running requests preempted")

    async def token_logprobs(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """The engine's log-prob of a fixed completion (prompt log-probs over prompt+completion), for
        `jury check-sync`."""
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=1.0)
        ids = list(prompt_ids) + list(completion_ids)
        final = None
        async for out in self.engine.generate(await render(self.engine, {"prompt_token_ids": ids}), params,
                                              request_id=f"score-{time.perf_counter()}"):
            final = out
        rows = final.prompt_logprobs[len(prompt_ids):]
        return [row[tok].logprob for row, tok in zip(rows, completion_ids)]

    async def is_started(self) -> bool:
        """False after Ray restarted this actor: the driver wires it in again."""
        return self.tasks is not None

    async def connect_rollouts(self, endpoints: list[str]):
        """A restarted verifier's new endpoint."""
        self.rollouts.connect(endpoints)

    async def fault(self, action: str, seconds: float = 0.0):
        """Fault injection: "slow" waits `seconds` before each task from now on; "raise" makes the
        loop raise on its next task (the actor must then fail, not hang)."""
        self._fault, self._slow_s = action, seconds if action == "slow" else self._slow_s

    async def _injected_fault(self):
        if self._fault == "raise":
            raise RuntimeError(f"fault injection: {self.actor_id}'s loop raises")
        if self._slow_s:
            await asyncio.sleep(self._slow_s)

    async def stats(self) -> dict:
        out = dict(self._stats, version=self.version, in_flight=self._in_flight,
                   busy_s=self._stats["busy_s"] + (time.perf_counter() - self._busy_since if self._in_flight else 0.0),
                   task_queue=self.tasks.depth() if self.tasks else 0,
                   running_seq_s=self.occupancy.running_area, running_max=self.occupancy.max_running)
        if self.tasks:
            out.update(self.tasks.stats.as_dict("tasks"))
            out.update(self.rollouts.stats.as_dict("rollouts"))
        return out

    async def occupancy_timeline(self, since: float = 0.0) -> dict:
        """The engine's sequences running and waiting over time (Occupancy.timeline)."""
        return self.occupancy.timeline(since)

    async def stop(self):
        if self._engine_watch:  # the engine is about to stop on purpose: not a death to fail on
            self._engine_watch.cancel()
        if self.tasks:
            self.tasks.wake("stop")
            if self._loop_task:
                await asyncio.wait_for(self._loop_task, timeout=10)
            await self._idle.wait()
            self.tasks.close()
            self.rollouts.close()
        self.engine.shutdown(timeout=stop_grace_s())

    async def pid(self) -> int:
        return os.getpid()

    async def engine_processes(self) -> list[dict]:
        """Each engine worker's pid, cores, torch threads and whether cpu_engine.py forked it
        (WeightReceiver.jury_process)."""
        return await self.engine.collective_rpc("jury_process")


def _exit_actor(engine):
    """Stop the engine's processes, then end this process with a failure code (not Ray's
    intentional exit_actor, which would not be restarted)."""
    try:
        engine.shutdown(timeout=stop_grace_s())
    finally:
        logging.shutdown()
        os._exit(70)


async def render(engine, prompt: dict):
    """A prompt dict ({"prompt": text} or {"prompt_token_ids": ids}) as the engine's input,
    through vLLM's renderer (raw prompts handed to generate() are deprecated)."""
    (engine_input,) = await engine.renderer.render_cmpl_async([prompt])
    return engine_input


def _sample(c) -> Sample:
    ids = list(c.token_ids)
    lps = [row[t].logprob for row, t in zip(c.logprobs, ids)] if c.logprobs else [0.0] * len(ids)
    return Sample(token_ids=np.asarray(ids, np.int32), logprobs=np.asarray(lps, np.float32),
                  text=c.text, finish_reason=str(c.finish_reason or "abort"))


def group_versions(samples: list[Sample], started: int, finished: int) -> tuple[int, int]:
    """A group's version_start and version_end: the versions the generator held when its request
    started and when it finished, or, where its tokens carry the versions that sampled them
    (sync_mode inflight), the oldest and newest of those. A request still waiting in the engine's
    queue across a sync samples every token with the new weights: stamped with the start, its
    staleness was a version too high, and continuous admission dropped such groups as over budget."""
    stamped = [s.token_versions for s in samples if len(s.token_versions)]
    if not stamped:
        return started, finished
    return min(int(v.min()) for v in stamped), max(int(v.max()) for v in stamped)
