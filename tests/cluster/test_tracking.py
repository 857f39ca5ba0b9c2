"""Experiment tracking: what each tracker wrote, read back with its own library and compared
with metrics.jsonl (the record). TensorBoard through its EventAccumulator; W&B's offline run
file through wandb's own protobuf records (wandb 0.30 ships no Python reader for it)."""
import json
import math
import struct
import sys
import zlib
from pathlib import Path

import pytest

from jury.cluster.metrics import MetricsLog, read_metrics
from jury.cluster.tracking import open_trackers, scalars, wandb_mode
from jury.protocol.config_load import load_config, to_dict

# three learner steps as the driver logs them: histograms nested, a NaN loss, a string
ROWS = [
    {"reward/mean": 0.25, "learner/loss": 1.5, "staleness/max": 1, "staleness/hist": {0: 3, 1: 1},
     "verifier/verdicts": {"correct": 5, "incorrect": 3}, "sync/ok": True, "note": "first"},
    {"reward/mean": 0.5, "learner/loss": math.nan, "staleness/max": 2, "staleness/hist": {0: 2, 2: 2},
     "verifier/verdicts": {"correct": 6, "timeout": 2}, "sync/ok": False, "note": None},
    {"reward/mean": 0.75, "learner/loss": -0.5, "staleness/max": 0, "staleness/hist": {0: 4},
     "verifier/verdicts": {"correct": 8}, "sync/ok": True, "note": [1, 2]},
]


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-6)


def test_a_row_becomes_scalars_named_as_in_metrics_jsonl_and_integer_histograms():
    import numpy as np

    numbers, hists = scalars({"reward/mean": np.float32(0.5), "learner/tokens": 12, "sync/ok": True,
                              "learner/loss": math.nan, "note": "x", "none": None, "list": [1],
                              "staleness/hist": {0: 3, 2: 1}, "verifier/verdicts": {"correct": 5, "timeout": 1}})
    assert numbers.keys() == {"reward/mean", "learner/tokens", "sync/ok", "learner/loss", "staleness/hist/0",
                              "staleness/hist/2", "verifier/verdicts/correct", "verifier/verdicts/timeout"}
    assert (numbers["reward/mean"], numbers["learner/tokens"], numbers["sync/ok"]) == (0.5, 12.0, 1.0)
    assert math.isnan(numbers["learner/loss"])
    assert (numbers["staleness/hist/0"], numbers["verifier/verdicts/timeout"]) == (3.0, 1.0)
    # only the dict over integers is a histogram; read back from JSON its keys are strings
    assert hists == {"staleness/hist": {0: 3.0, 2: 1.0}}
    assert scalars({"staleness/hist": {"0": 3, "2": 1}})[1] == {"staleness/hist": {0: 3.0, 2: 1.0}}


def test_wandb_auto_is_online_only_where_a_user_has_logged_in(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home)}
    assert wandb_mode("auto", env) == "offline"  # no key, no netrc
    assert wandb_mode("online", env) == "online" and wandb_mode("offline", {"WANDB_API_KEY": "k"}) == "offline"
    assert wandb_mode("auto", {**env, "WANDB_API_KEY": "k" * 40}) == "online"
    assert wandb_mode("auto", {**env, "WANDB_API_KEY": "k", "WANDB_MODE": "offline"}) == "offline"
    assert wandb_mode("auto", {**env, "WANDB_API_KEY": "k", "WANDB_MODE": "disabled"}) == "disabled"
    (home / ".netrc").write_text("machine example.com login user password secret\n")
    assert wandb_mode("auto", env) == "offline"  # credentials, but not for W&B
    (home / ".netrc").write_text("machine api.wandb.ai login user password " + "k" * 40 + "\n")
    assert wandb_mode("auto", env) == "online"  # what `wandb login` writes
    assert wandb_mode("auto", {**env, "WANDB_BASE_URL": "https://wandb.example.org"}) == "offline"
    other = tmp_path / "netrc"
    other.write_text("machine wandb.example.org login user password secret\n")
    assert wandb_mode("auto", {**env, "WANDB_BASE_URL": "https://wandb.example.org", "NETRC": str(other)}) == "online"
    (home / ".netrc").write_text("machine api.wandb.ai login user\n")  # no key
    assert wandb_mode("auto", env) == "offline"
    (home / ".netrc").write_text("machin api.wandb.ai\n")  # unreadable: stay offline, say so
    assert wandb_mode("auto", env) == "offline"


def test_a_missing_tracker_package_is_refused_naming_it(tmp_path, monkeypatch):
    from jury.cluster.driver import RunFailed, train

    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    cfg = load_config(None, [f"run_dir={tmp_path}", "tracking=[wandb]", "progress=false"])
    with pytest.raises(ImportError, match="wandb needs the wandb package"):
        open_trackers(cfg, tmp_path)
    with pytest.raises(RunFailed, match=r"pip install 'jury-rl\[track\]'"):  # before any process starts
        train(cfg)


def _log_run(cfg, run_dir: Path, png: Path, first_step: int = 0, rows=ROWS) -> dict:
    """What train() does with the trackers, without the processes: rows through MetricsLog, then
    the summary and a plot."""
    trackers = open_trackers(cfg, run_dir, first_step)
    metrics = MetricsLog(run_dir, len(rows), progress=False, initial=first_step, trackers=trackers)
    for i, row in enumerate(rows):
        metrics.log(first_step + i, row)
    metrics.close()
    summary = {"run_dir": str(run_dir), "wall_s": 12.5, "steps": len(rows), "reward_last_fifth": 0.75}
    trackers.summary(summary)
    trackers.files([png])
    trackers.close()
    return summary


@pytest.fixture
def png(tmp_path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, 1])
    path = tmp_path / "curves.png"
    fig.savefig(path, dpi=50)
    plt.close(fig)
    return path


# ── TensorBoard ──
def tensorboard_events(run_dir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"),
                           size_guidance={"scalars": 0, "histograms": 0, "tensors": 0, "images": 0})
    return acc.Reload()


def assert_scalars_match_metrics(acc, rows: list[dict]):
    """Every number of every metrics.jsonl row is a TensorBoard scalar of the same name at its step."""
    tags = set(acc.Tags()["scalars"])
    for row in rows:
        numbers, _ = scalars({k: v for k, v in row.items() if k != "step"})
        for name, value in numbers.items():
            assert name in tags, f"{name} missing from TensorBoard"
            at_step = [e.value for e in acc.Scalars(name) if e.step == row["step"]]
            assert len(at_step) == 1 and same(at_step[0], value), (name, row["step"], at_step, value)


def test_tensorboard_event_files_read_back_as_metrics_jsonl_holds_them(tmp_path, png):
    pytest.importorskip("tensorboard", reason="tracking=[tensorboard] needs the tensorboard package (extra: track)")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cfg = load_config(None, [f"run_dir={run_dir}", "tracking=[tensorboard]"])
    _log_run(cfg, run_dir, png)

    rows = read_metrics(run_dir)
    acc = tensorboard_events(run_dir)
    assert_scalars_match_metrics(acc, rows)
    assert "note" not in acc.Tags()["scalars"]  # strings, None and lists are no metric
    assert [e.value for e in acc.Scalars("sync/ok")] == [1.0, 0.0, 1.0]
    assert [e.step for e in acc.Scalars("time_s")] == [0, 1, 2]
    # staleness/hist as a histogram: a bucket per staleness from the smallest to the largest
    hist = {e.step: e.histogram_value for e in acc.Histograms("staleness/hist")}
    assert list(hist[1].bucket_limit) == [0.5, 1.5, 2.5] and list(hist[1].bucket) == [2, 0, 2]
    assert (hist[1].min, hist[1].max, hist[1].num, hist[1].sum, hist[1].sum_squares) == (0, 2, 4, 4, 8)
    assert list(hist[2].bucket) == [4]

    def text(tag):
        [event] = acc.Tensors(f"{tag}/text_summary")
        return event.tensor_proto.string_val[0].decode()

    assert f"run_dir: {run_dir}" in text("config") and "tracking:\n    - tensorboard" in text("config")
    assert "wall_s: 12.5" in text("summary")
    [image] = acc.Images("plots/curves")
    assert image.step == 2 and (image.width, image.height) == (100, 75)


def test_tensorboard_hides_the_steps_a_resumed_run_trains_again(tmp_path, png):
    pytest.importorskip("tensorboard", reason="tracking=[tensorboard] needs the tensorboard package (extra: track)")
    cfg = load_config(None, [f"run_dir={tmp_path}", "tracking=[tensorboard]"])
    _log_run(cfg, tmp_path, png)  # steps 0, 1, 2; the checkpoint was at version 1
    _log_run(cfg, tmp_path, png, first_step=1, rows=[{"reward/mean": 0.9}, {"reward/mean": 1.0}])
    acc = tensorboard_events(tmp_path)
    events = acc.Scalars("reward/mean")  # steps 1 and 2 once each, from the second run
    assert [e.step for e in events] == [0, 1, 2]
    assert [e.value for e in events] == pytest.approx([0.25, 0.9, 1.0])  # TensorBoard keeps float32


# ── Weights & Biases ──
def wandb_records(run_file: Path) -> list:
    """The records of a .wandb run file: wandb's own `Record` protobufs in its log format (a 7-byte
    header ':W&B', 0xBEE1, version 0; 32 KiB blocks of chunks, each with a CRC-32 of type and data,
    a length and a type: full, first, middle, last). Every checksum is checked."""
    from wandb.proto import wandb_internal_pb2

    data = run_file.read_bytes()
    assert data[:7] == struct.pack("<4sHB", b":W&B", 0xBEE1, 0), data[:7]
    records, pending, pos, block = [], b"", 7, 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # too little room left for a chunk header: the block is padded
            pos += block - pos % block
            continue
        crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        if kind == 0 and length == 0:  # zero padding at a block's end
            pos += block - pos % block
            continue
        assert zlib.crc32(chunk, zlib.crc32(bytes([kind]))) == crc, f"bad checksum at byte {pos}"
        pos += 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
    assert pos == len(data), f"{len(data) - pos} bytes left unread"
    return records


def _items(items) -> dict:
    """history/summary items -> {"a/b": value}; nested keys joined with '.'."""
    return {".".join(i.nested_key) or i.key: json.loads(i.value_json) for i in items}


def read_wandb_run(run_dir: Path) -> dict:
    """One offline run under run_dir/wandb/: its config, history rows by step, summary, files, exit code."""
    [run_file] = (run_dir / "wandb").glob("offline-run-*/run-*.wandb")
    out: dict = {"config": {}, "history": {}, "summary": {}, "files": [], "exit_code": None, "dir": run_file.parent}
    for r in wandb_records(run_file):
        kind = r.WhichOneof("record_type")
        if kind == "run":
            out["run"] = r.run
            out["config"].update({u.key: json.loads(u.value_json) for u in r.run.config.update})
        elif kind == "history":
            row = _items(r.history.item)
            out["history"].setdefault(row["_step"], {}).update(row)
        elif kind == "summary":
            out["summary"].update(_items(r.summary.update))
        elif kind == "files":
            out["files"] += [f.path for f in r.files.files]
        elif kind == "exit":
            out["exit_code"] = r.exit.exit_code
    return out


@pytest.fixture
def wandb_offline(monkeypatch, tmp_path):
    """A machine where nobody logged in to W&B: no key, no netrc, no mode forced."""
    pytest.importorskip("wandb", reason="tracking=[wandb] needs the wandb package (extra: track)")
    for var in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "WANDB_DIR"):
        monkeypatch.delenv(var, raising=False)
    # no netrc (NETRC, not HOME: the tiny model and the engines' caches live under HOME)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


def test_wandb_runs_offline_without_login_and_its_run_file_reads_back(tmp_path, png, wandb_offline):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    cfg = load_config(None, [f"run_dir={run_dir}", "tracking=[wandb]", "wandb.project=jury-test"])
    summary = _log_run(cfg, run_dir, png)

    run = read_wandb_run(run_dir)
    assert run["run"].project == "jury-test" and run["run"].display_name == "run"
    assert {k: v for k, v in run["config"].items() if k != "_wandb"} == to_dict(cfg)
    rows = read_metrics(run_dir)
    assert sorted(run["history"]) == [r["step"] for r in rows]
    for row in rows:
        logged = run["history"][row["step"]]
        numbers, _ = scalars({k: v for k, v in row.items() if k != "step"})
        for name, value in numbers.items():
            assert name in logged and same(float(logged[name]), value), (name, row["step"], logged.get(name), value)
        assert "note" not in logged
    hist = run["history"][1]  # staleness {0: 2, 2: 2}: one bin per staleness, centred on it
    assert hist["staleness/hist._type"] == "histogram"
    assert (hist["staleness/hist.values"], hist["staleness/hist.bins"]) == ([2, 0, 2], [-0.5, 0.5, 1.5, 2.5])
    assert run["history"][2]["plots/curves._type"] == "image-file"  # the plot, at the last step
    assert {k: run["summary"][k] for k in summary} == summary
    assert "curves.png" in run["files"] and (run["dir"] / "files" / "curves.png").read_bytes() == png.read_bytes()
    assert run["exit_code"] == 0


def test_a_run_that_fails_is_closed_as_failed_in_wandb(tmp_path, wandb_offline):
    cfg = load_config(None, [f"run_dir={tmp_path}", "tracking=[wandb]"])
    trackers = open_trackers(cfg, tmp_path)
    trackers.log(0, {"reward/mean": 0.5})
    trackers.close()  # no summary: the run died
    run = read_wandb_run(tmp_path)
    assert run["history"][0]["reward/mean"] == 0.5 and run["exit_code"] == 1
