"""A run's data, checked before anything starts (`train` calls these first).

    check_data(cfg)                        the dataset and data.eval_path, row by row (streamed):
                                           a bad file is refused before a model is built or Ray starts
    check_prompts(cfg, model_path, data)   the template and the chat template against the model's
                                           tokenizer, every prompt's length; data.epochs caps steps
    RunData.write(run_dir)                 prompt_template.txt (the template, usable as data.template)
                                           and prompt_example.txt (the first problem as sent)

Refusals are DataError, whose message names the file, the line or row, and the field;
`jury train` prints it after "jury train:" and exits 2.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from itertools import islice
from pathlib import Path

from jury.data.files import BATCH, DataReport, check_dataset, read_problems
from jury.data.problems import DataError, Problem
from jury.data.prompts import PromptFormat
from jury.data.tasks import BUILTIN_DATASETS
from jury.protocol.config import RunConfig

log = logging.getLogger(__name__)


@dataclass
class RunData:
    cfg: RunConfig                 # steps capped by data.epochs
    train: DataReport | None       # None: a built-in task (synthetic, chain)
    eval: DataReport | None
    prompts: PromptFormat | None = None
    too_long: int = 0              # good rows whose prompt is over max_prompt_tokens (the feeder skips them)
    example: str = ""              # the first problem's prompt, as the generator receives it

    def metrics(self) -> dict:
        if self.train is None:
            return {}
        return {"data/rows": self.train.rows, "data/bad_rows_skipped": self.train.bad,
                "data/prompts_too_long": self.too_long}

    def write(self, run_dir: Path):
        (run_dir / "prompt_template.txt").write_text(self.prompts.template.text, encoding="utf-8")
        (run_dir / "prompt_example.txt").write_text(self.example, encoding="utf-8")


def check_data(cfg: RunConfig) -> RunData:
    """Every row of the dataset and of the evaluation file; DataError refuses the run."""
    data = cfg.data
    builtin = cfg.dataset in BUILTIN_DATASETS
    if builtin and data.epochs:
        raise DataError(f"data.epochs needs a dataset file: the {cfg.dataset} task has no end")
    train = None if builtin else check_dataset(cfg.dataset, data)
    evaluation = check_dataset(data.eval_path, data) if data.eval_path else None
    return RunData(cfg, train, evaluation)


def check_prompts(cfg: RunConfig, model_path: str, run: RunData) -> RunData:
    """The prompt format on the model's tokenizer; how many prompts fit; the steps data.epochs allows."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    prompts = PromptFormat.from_config(cfg.data, tokenizer, model=cfg.model)
    run = dataclasses.replace(run, prompts=prompts, example=prompts.render(_first_problem(cfg).problem))
    if run.train is None:
        return run
    too_long = _count_too_long(read_problems(cfg.dataset, cfg.data), prompts, tokenizer, cfg.max_prompt_tokens)
    usable = run.train.rows - too_long
    if usable == 0:
        raise DataError(f"{cfg.dataset}: no prompt fits max_prompt_tokens={cfg.max_prompt_tokens} "
                        f"({prompts.describe()})")
    if too_long:
        log.warning("%s: %d of %d prompts are over max_prompt_tokens=%d; the feeder skips them",
                    cfg.dataset, too_long, run.train.rows, cfg.max_prompt_tokens)
    steps = cfg.steps
    if cfg.data.epochs:
        steps = min(steps, cfg.data.epochs * usable // cfg.batch_groups)
        if steps < 1:
            raise DataError(f"{cfg.dataset}: data.epochs={cfg.data.epochs} of {usable} usable problems is less "
                            f"than one batch of batch_groups={cfg.batch_groups}")
        if steps < cfg.steps:
            log.warning("data.epochs=%d of %d usable problems is %d steps of %d: the run stops there, not at "
                        "steps=%d", cfg.data.epochs, usable, steps, cfg.batch_groups, cfg.steps)
    return dataclasses.replace(run, cfg=dataclasses.replace(cfg, steps=steps), too_long=too_long)


def _count_too_long(problems, prompts: PromptFormat, tokenizer, limit: int) -> int:
    n = 0
    while batch := [prompts.render(p.problem) for p in islice(problems, BATCH)]:
        n += sum(len(ids) > limit for ids in tokenizer(batch)["input_ids"])
    return n


def _first_problem(cfg: RunConfig) -> Problem:
    if cfg.dataset in BUILTIN_DATASETS:
        return next(BUILTIN_DATASETS[cfg.dataset](cfg.seed))
    return next(read_problems(cfg.dataset, cfg.data))
