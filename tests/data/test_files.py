"""Datasets: JSONL, Parquet and `datasets` folders read with the config's field names, every
bad row counted and the first few named (file, line or row, field), epochs reshuffled by seed,
and nothing loaded whole. Every file is written here, small."""
import json
import tracemalloc
from collections import Counter

import pytest

from jury.data.problems import DataError
from conftest import load_jsonl
from jury.data.files import buffered_shuffle, check_dataset, detect_format, epoch_stream, read_problems
from jury.protocol.config import DataConfig


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def _parquet(path, columns, row_group_size=None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path, row_group_size=row_group_size)
    return str(path)


def _math(n):
    return [{"problem": f"q{i}", "answer": str(i)} for i in range(n)]


# ── JSONL ──
def test_jsonl_with_the_configs_field_names_ids_and_integer_answers(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", [{"question": "1+1?", "final": 2, "uid": "a"}, "",
                                         {"question": "2+2?", "final": "04", "uid": 7}])
    data = DataConfig(problem_key="question", answer_key="final", id_key="uid")
    assert check_dataset(path, data).rows == 2
    got = [(p.problem, p.answer, p.source) for p in read_problems(path, data)]
    # "04" stays "04" (a reader that infers one type per column would hand back 4)
    assert got == [("1+1?", "2", f"{path}#a"), ("2+2?", "04", f"{path}#7")]


def test_every_bad_jsonl_row_is_counted_and_the_first_five_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    lines = [json.dumps({"problem": "ok", "answer": "1"}).encode(),
             b'{"problem": "caf\xe9", "answer": "1"}',        # 2: Latin-1, not UTF-8
             b"{not json",                                     # 3
             json.dumps({"problem": "p", "answer": None}).encode(),   # 4: null label
             json.dumps({"problem": "  ", "answer": "1"}).encode(),   # 5: empty problem
             json.dumps({"problem": "p", "answer": 0.5}).encode(),    # 6: a float label
             json.dumps(["problem", "answer"]).encode(),              # 7: not an object
             json.dumps({"question": "p", "answer": "1"}).encode(),   # 8: no problem field
             json.dumps({"problem": "p", "answer": True}).encode()]   # 9: a boolean label
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(DataError) as e:
        check_dataset(str(path), DataConfig())
    msg = str(e.value)
    assert msg.startswith(f"{path}: 8 bad rows of 9 (data.bad_rows=refuse):")
    assert f"{path}:2: not UTF-8 (byte 0xe9 at column 17)" in msg
    assert f"{path}:3: not JSON (" in msg
    assert f"{path}:4: answer: null" in msg
    assert f"{path}:5: problem: empty" in msg
    assert f"{path}:6: answer: a number 0.5, not text or an integer" in msg
    assert f"{path}:7" not in msg and "... and 3 more" in msg  # five shown, all counted
    assert "data.bad_rows=skip" in msg

    report = check_dataset(str(path), DataConfig(bad_rows="skip"))
    assert (report.rows, report.bad, len(report.first_bad)) == (1, 8, 5)
    assert [p.problem for p in read_problems(str(path), DataConfig(bad_rows="skip"))] == ["ok"]
    more = path.read_bytes().split(b"\n")[6:9]
    (tmp_path / "more.jsonl").write_bytes(b"\n".join(more))
    msg = str(pytest.raises(DataError, check_dataset, str(tmp_path / "more.jsonl"), DataConfig()).value)
    assert "more.jsonl:1: not a JSON object but a list" in msg
    assert "more.jsonl:2: problem: missing (the row has: question, answer)" in msg
    assert "more.jsonl:3: answer: a boolean True, not text or an integer" in msg


def test_empty_files_and_files_without_a_good_row_are_refused_even_when_skipping(tmp_path):
    skip = DataConfig(bad_rows="skip")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(DataError, match="empty.jsonl: empty, no rows"):
        check_dataset(str(empty), skip)
    path = _jsonl(tmp_path / "nulls.jsonl", [{"problem": "p", "answer": None}] * 3)
    with pytest.raises(DataError, match=r"nulls.jsonl: no usable row, all 3 are bad:\n  .*nulls.jsonl:1: answer: null"):
        check_dataset(path, skip)
    with pytest.raises(DataError, match="no such file"):
        check_dataset(str(tmp_path / "nope.jsonl"), skip)


def test_load_jsonl_keeps_its_contract(tmp_path):
    good = _jsonl(tmp_path / "good.jsonl", [{"problem": "1+1?", "answer": 2}, "", {"problem": "2+2?", "answer": "4"}])
    assert [(p.problem, p.answer, p.source) for p in load_jsonl(good)] == [("1+1?", "2", good), ("2+2?", "4", good)]


# ── Parquet and `datasets` folders ──
def test_parquet_rows_are_numbered_across_row_groups(tmp_path):
    path = _parquet(tmp_path / "d.parquet", {"problem": ["a", "b", "c", "d", "e"],
                                             "answer": ["1", "2", None, "4", ""], "extra": [0] * 5},
                    row_group_size=2)
    with pytest.raises(DataError) as e:
        check_dataset(path, DataConfig())
    assert str(e.value).startswith(f"{path}: 2 bad rows of 5")
    assert f"{path} row 2: answer: null" in str(e.value) and f"{path} row 4: answer: empty" in str(e.value)
    assert [p.answer for p in read_problems(path, DataConfig())] == ["1", "2", "4"]


def test_a_missing_column_is_refused_naming_the_key_to_set(tmp_path):
    path = _parquet(tmp_path / "d.parquet", {"question": ["a"], "answer": ["1"]})
    with pytest.raises(DataError, match=r"d.parquet: no column 'problem' \(columns: question, answer\); "
                                        r"set data.problem_key"):
        check_dataset(path, DataConfig(bad_rows="skip"))
    assert check_dataset(path, DataConfig(problem_key="question")).rows == 1
    (tmp_path / "x.parquet").write_text("not parquet")
    with pytest.raises(DataError, match="x.parquet: not a Parquet file"):
        check_dataset(str(tmp_path / "x.parquet"), DataConfig())


def test_a_folder_of_parquet_shards_numbers_rows_per_file(tmp_path):
    shards = tmp_path / "shards"
    shards.mkdir()
    _parquet(shards / "part-0.parquet", {"problem": ["a", "b"], "answer": ["1", "2"]})
    _parquet(shards / "part-1.parquet", {"problem": ["c", None], "answer": ["3", "4"]})
    assert detect_format(shards, "auto") == "parquet"
    with pytest.raises(DataError, match=r"part-1.parquet row 1: problem: null"):
        check_dataset(str(shards), DataConfig())
    assert [p.problem for p in read_problems(str(shards), DataConfig())] == ["a", "b", "c"]


def test_datasets_folders_saved_with_save_to_disk(tmp_path):
    import datasets

    ds = datasets.Dataset.from_dict({"q": ["a", "b", "c"], "a": [1, 2, None], "id": ["x", "y", "z"]})
    ds.save_to_disk(str(tmp_path / "one"))
    data = DataConfig(problem_key="q", answer_key="a", id_key="id", bad_rows="skip")
    report = check_dataset(str(tmp_path / "one"), data)
    assert (report.rows, report.bad, str(report.first_bad[0])) == (2, 1, f"{tmp_path / 'one'} row 2: a: null")
    assert [(p.problem, p.answer, p.source) for p in read_problems(str(tmp_path / "one"), data)] == [
        ("a", "1", f"{tmp_path / 'one'}#x"), ("b", "2", f"{tmp_path / 'one'}#y")]

    datasets.DatasetDict({"train": ds, "test": ds.select([0])}).save_to_disk(str(tmp_path / "dict"))
    assert check_dataset(str(tmp_path / "dict"), DataConfig(**{**data.__dict__, "split": "test"})).rows == 1
    with pytest.raises(DataError, match=r"no split 'validation' \(splits: train, test\); set data.split"):
        check_dataset(str(tmp_path / "dict"), DataConfig(**{**data.__dict__, "split": "validation"}))
    with pytest.raises(DataError, match=r"dict\[train\]: no column 'problem'"):
        check_dataset(str(tmp_path / "dict"), DataConfig())


def test_formats_are_told_by_extension_or_set(tmp_path):
    csv = tmp_path / "d.csv"
    csv.write_text("problem,answer\n")
    with pytest.raises(DataError, match=r"d.csv: cannot tell the format from the extension '.csv'; set data.format"):
        check_dataset(str(csv), DataConfig())
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="neither a `datasets` save_to_disk layout"):
        check_dataset(str(tmp_path / "empty"), DataConfig())
    lines = tmp_path / "d.json"
    _jsonl(lines, _math(2))
    assert check_dataset(str(lines), DataConfig(format="jsonl")).rows == 2


# ── epochs and shuffling ──
def test_each_epoch_is_a_seeded_reshuffle_of_the_good_rows(tmp_path):
    path = _jsonl(tmp_path / "d.jsonl", _math(20) + [{"problem": "bad", "answer": None}])
    data = DataConfig(epochs=3, bad_rows="skip")
    got = [p.problem for p in epoch_stream(path, data, seed=1)]
    epochs = [got[0:20], got[20:40], got[40:60]]
    assert len(got) == 60 and all(sorted(e) == sorted(f"q{i}" for i in range(20)) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 3  # each epoch its own order
    assert got == [p.problem for p in epoch_stream(path, data, seed=1)]
    assert got != [p.problem for p in epoch_stream(path, data, seed=2)]
    plain = [p.problem for p in epoch_stream(path, DataConfig(epochs=2, shuffle=False), seed=1)]
    assert plain == [f"q{i}" for i in range(20)] * 2


def test_a_small_buffer_still_gives_every_item_once():
    import random

    out = list(buffered_shuffle(iter(range(1000)), 10, random.Random(0)))
    assert sorted(out) == list(range(1000)) and out != list(range(1000))
    # within a window: an item leaves no earlier than size - 1 places before its own position
    assert all(pos >= item - 10 for pos, item in enumerate(out))
    counts = Counter(tuple(buffered_shuffle(iter(range(3)), 5, random.Random(s))) for s in range(600))
    assert len(counts) == 6 and min(counts.values()) > 60  # no larger than the buffer: every order


def test_large_files_are_streamed_not_loaded_whole(tmp_path):
    rows = [{"problem": f"problem {i} " + "x" * 200, "answer": str(i)} for i in range(20_000)]
    path = _jsonl(tmp_path / "big.jsonl", rows)
    pq = _parquet(tmp_path / "big.parquet", {"problem": [r["problem"] for r in rows],
                                             "answer": [r["answer"] for r in rows]}, row_group_size=1000)
    size = (tmp_path / "big.jsonl").stat().st_size  # about 4.5 MB
    for p in (path, pq):
        tracemalloc.start()
        try:
            assert check_dataset(p, DataConfig()).rows == 20_000
            stream = epoch_stream(p, DataConfig(shuffle_buffer=100), seed=0)
            assert sum(1 for _, _ in zip(range(30_000), stream)) == 30_000
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < size / 4, f"{p}: peak {peak} bytes of Python objects for a {size}-byte file"
