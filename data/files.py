"""Real datasets: JSONL, Parquet and `datasets` folders, checked row by row before a run starts.

    check_dataset(path, data)        one streamed pass: good rows counted, every bad row counted
                                     and the first few kept with file, line or row, and field;
                                     refuses the file (DataError) or reports rows to skip
    read_problems(path, data)        the good rows as Problems, in file order, streamed
    epoch_stream(path, data, seed)   epoch after epoch, each reshuffled by (seed, epoch)

Where a row is: JSONL by line, counted from 1 as editors do; Parquet and `datasets` folders
by row, counted from 0 as `dataset[i]` does (per file for a folder of Parquet shards).

A bad row: a JSONL line that is not UTF-8, not JSON or not an object; a problem that is
missing, null, not text or empty; an answer that is missing, null, empty, or neither text
nor an integer (a float or boolean label would be compared as its Python spelling,
"0.30000000000000004" or "True"); with data.id_key, an id that is missing or neither text
nor an integer; with data.rewrite_key, a rewrite that is missing, null, not text or empty. A missing column, an empty file or a file without one good row is refused
whatever data.bad_rows says.

JSONL is read line by line with the json module, not through `datasets`: its JSON reader
infers one type per column, so a file whose answers mix 2 and "04" hands back 4 for "04",
and a broken line is reported without its number. Parquet is read by row groups (pyarrow,
as `datasets` reads it), a save_to_disk folder through `datasets.load_from_disk`
(memory-mapped). Nothing is loaded whole: the shuffle buffer is the most held at once.
"""
from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from jury.data.problems import DataError, Problem
from jury.protocol.config import DataConfig

log = logging.getLogger(__name__)

SHOWN = 5     # bad rows quoted in a message; every one is counted
BATCH = 1024  # rows per Arrow batch


@dataclass(frozen=True)
class BadRow:
    where: str   # "train.jsonl:7", "train.parquet row 12"
    field: str   # the field at fault; "" when the row itself is (not UTF-8, not JSON)
    reason: str

    def __str__(self) -> str:
        return f"{self.where}: {self.field}: {self.reason}" if self.field else f"{self.where}: {self.reason}"


@dataclass
class DataReport:
    path: str
    rows: int = 0    # good rows
    bad: int = 0     # bad rows, all counted
    first_bad: list[BadRow] = field(default_factory=list)

    def listing(self) -> str:
        more = f"\n  ... and {self.bad - len(self.first_bad)} more" if self.bad > len(self.first_bad) else ""
        return "".join(f"\n  {b}" for b in self.first_bad) + more


# ── formats ──
def detect_format(path: Path, fmt: str) -> str:
    """jsonl, parquet or hf; a missing path or an unknown kind is refused."""
    if not path.exists():
        raise DataError(f"{path}: no such file or folder")
    if fmt == "hf" or (fmt == "auto" and path.is_dir() and _is_saved_dataset(path)):
        if not path.is_dir():
            raise DataError(f"{path}: data.format=hf needs a `datasets` save_to_disk folder, this is a file")
        return "hf"
    if fmt != "auto":
        if fmt == "jsonl" and path.is_dir():
            raise DataError(f"{path}: data.format=jsonl needs a file, this is a folder")
        return fmt
    if path.is_dir():
        if any(path.glob("*.parquet")):
            return "parquet"
        raise DataError(f"{path}: a folder with neither a `datasets` save_to_disk layout "
                        f"(dataset_info.json or dataset_dict.json) nor *.parquet files")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".parquet", ".pq"):
        return "parquet"
    raise DataError(f"{path}: cannot tell the format from the extension {suffix!r}; "
                    f"set data.format to jsonl, parquet or hf")


def _is_saved_dataset(path: Path) -> bool:
    return (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()


def _columns(data: DataConfig) -> dict[str, str]:
    """Config key -> column name, for the fields a run reads."""
    keys = {"problem_key": data.problem_key, "answer_key": data.answer_key}
    if data.id_key:
        keys["id_key"] = data.id_key
    if data.rewrite_key:
        keys["rewrite_key"] = data.rewrite_key
    return keys


def _refuse_missing(where: str, have: list[str], data: DataConfig):
    for key, column in _columns(data).items():
        if column not in have:
            raise DataError(f"{where}: no column {column!r} (columns: {', '.join(have) or 'none'}); "
                            f"set data.{key}")


def iter_rows(path: Path, data: DataConfig, order: random.Random | None = None
              ) -> Iterator[tuple[str, dict | BadRow]]:
    """(where, row) for every row, or (where, BadRow) for a line that is not a JSON object.
    `order` shuffles the files of a Parquet folder."""
    fmt = detect_format(path, data.format)
    if fmt == "jsonl":
        return _jsonl_rows(path)
    if fmt == "parquet":
        return _parquet_rows(path, data, order)
    return _hf_rows(path, data)


def _jsonl_rows(path: Path) -> Iterator[tuple[str, dict | BadRow]]:
    with open(path, "rb") as f:  # bytes: a line that is not UTF-8 is one bad row, not the end of the file
        for lineno, raw in enumerate(f, 1):
            where = f"{path}:{lineno}"
            if lineno == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")  # a byte-order mark
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield where, BadRow(where, "", f"not UTF-8 (byte 0x{raw[e.start]:02x} at column {e.start + 1})")
                continue
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                yield where, BadRow(where, "", f"not JSON ({e.msg} at column {e.colno})")
                continue
            yield where, value if isinstance(value, dict) else BadRow(
                where, "", f"not a JSON object but {_kind(value)} {_short(value)}")


def _parquet_rows(path: Path, data: DataConfig, order: random.Random | None) -> Iterator[tuple[str, dict]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    if order is not None:
        order.shuffle(files)
    columns = list(_columns(data).values())
    for f in files:
        try:
            pf = pq.ParquetFile(f)
        except (pa.ArrowException, OSError) as e:
            raise DataError(f"{f}: not a Parquet file ({e})") from None
        _refuse_missing(str(f), pf.schema_arrow.names, data)
        row = 0
        for batch in pf.iter_batches(batch_size=BATCH, columns=columns):
            for values in batch.to_pylist():
                yield f"{f} row {row}", values
                row += 1


def _hf_rows(path: Path, data: DataConfig) -> Iterator[tuple[str, dict]]:
    import datasets

    try:
        ds = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as e:
        raise DataError(f"{path}: not a `datasets` save_to_disk folder ({e})") from None
    where = str(path)
    if isinstance(ds, datasets.DatasetDict):
        if data.split not in ds:
            raise DataError(f"{path}: no split {data.split!r} (splits: {', '.join(ds)}); set data.split")
        ds, where = ds[data.split], f"{path}[{data.split}]"
    _refuse_missing(where, ds.column_names, data)
    columns = list(_columns(data).values())
    row = 0
    for batch in ds.select_columns(columns).iter(batch_size=BATCH):  # memory-mapped, batch by batch
        for values in zip(*(batch[c] for c in columns)):
            yield f"{where} row {row}", dict(zip(columns, values))
            row += 1


# ── rows ──
def check_row(where: str, row: dict, data: DataConfig, source: str) -> Problem | BadRow:
    """The row as a Problem, or the first thing wrong with it."""
    problem, why = _field(row, data.problem_key, integers=False)
    if why:
        return BadRow(where, data.problem_key, why)
    answer, why = _field(row, data.answer_key, integers=True)
    if why:
        return BadRow(where, data.answer_key, why)
    if data.id_key:
        ident, why = _field(row, data.id_key, integers=True)
        if why:
            return BadRow(where, data.id_key, why)
        source = f"{source}#{ident}"
    rewrite = None
    if data.rewrite_key:
        rewrite, why = _field(row, data.rewrite_key, integers=False)
        if why:
            return BadRow(where, data.rewrite_key, why)
    return Problem(problem, answer, source, rewrite)


def _field(row: dict, key: str, *, integers: bool) -> tuple[str, str]:
    """(text, "") or ("", what is wrong)."""
    if key not in row:
        return "", f"missing (the row has: {', '.join(map(str, row)) or 'nothing'})"
    value = row[key]
    if value is None:
        return "", "null"
    if isinstance(value, bool) or not isinstance(value, (str, int)) or (isinstance(value, int) and not integers):
        return "", f"{_kind(value)} {_short(value)}, not text{' or an integer' if integers else ''}"
    text = str(value)
    if not text.strip():
        return "", "empty"
    return text, ""


def _kind(value) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "text", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ── a whole file ──
TRAIN_SKIP_HINT = "set data.bad_rows=skip to train without them (counted as data/bad_rows_skipped)"


def check_dataset(path: str, data: DataConfig, skip_hint: str = TRAIN_SKIP_HINT) -> DataReport:
    """One streamed pass over the file. Refuses it (DataError) when it has no good row, or
    bad rows under data.bad_rows=refuse; else returns the counts (bad rows to be skipped).
    skip_hint: how the command at hand skips them (training: data.bad_rows=skip)."""
    report = DataReport(path)
    for where, row in iter_rows(Path(path), data):
        checked = row if isinstance(row, BadRow) else check_row(where, row, data, path)
        if isinstance(checked, BadRow):
            report.bad += 1
            if len(report.first_bad) < SHOWN:
                report.first_bad.append(checked)
        else:
            report.rows += 1
    if report.rows == 0 and report.bad == 0:
        raise DataError(f"{path}: empty, no rows")
    if report.rows == 0:
        raise DataError(f"{path}: no usable row, all {report.bad} are bad:{report.listing()}")
    if report.bad and data.bad_rows == "refuse":
        raise DataError(f"{path}: {report.bad} bad row{'s' * (report.bad > 1)} of {report.bad + report.rows} "
                        f"(data.bad_rows=refuse):{report.listing()}\nFix them, or {skip_hint}")
    if report.bad:
        log.warning("%s: skipping %d bad rows of %d (data.bad_rows=skip):%s", path, report.bad,
                    report.bad + report.rows, report.listing())
    return report


def read_problems(path: str, data: DataConfig, order: random.Random | None = None) -> Iterator[Problem]:
    """The good rows, in file order (Parquet shards in `order`); bad ones are passed over,
    check_dataset has counted them."""
    for where, row in iter_rows(Path(path), data, order):
        if not isinstance(row, BadRow):
            p = check_row(where, row, data, path)
            if isinstance(p, Problem):
                yield p


def epoch_stream(path: str, data: DataConfig, seed: int) -> Iterator[Problem]:
    """data.epochs passes (0: no end); with data.shuffle each pass is reshuffled by (seed, epoch),
    so a resumed run that skips what it used draws the same problems again."""
    epoch = 0
    while not data.epochs or epoch < data.epochs:
        rng = random.Random(f"{seed}/{epoch}") if data.shuffle else None
        problems = read_problems(path, data, rng)
        if rng is not None:
            problems = buffered_shuffle(problems, data.shuffle_buffer, rng)
        n = 0
        for p in problems:
            n += 1
            yield p
        if n == 0:
            raise DataError(f"{path}: no usable row")
        epoch += 1


def buffered_shuffle(items: Iterator, size: int, rng: random.Random) -> Iterator:
    """A shuffle holding at most `size` items: exact (uniform) when there are no more than
    that, else each item leaves at a random point of a sliding window."""
    buf: list = []
    for item in items:
        if len(buf) < size:
            buf.append(item)
            continue
        i = rng.randrange(size)
        yield buf[i]
        buf[i] = item
    rng.shuffle(buf)
    yield from buf


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, object]]:
    """(line number, value) for each non-empty line; a line that is not JSON is refused with its number."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not JSON ({e.msg})") from None
