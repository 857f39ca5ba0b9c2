"""Checkpoints that are whole or absent: written beside the last one, swapped in by rename.

    write_checkpoint(path, write, state)    # write(staging) fills a sibling folder, then:
        staging/state.json                  #   the run's state (version, data position, ...)
        staging/manifest.json               #   every file with its size and content hash, written last
        path -> .path.prev, staging -> path #   two renames: the previous checkpoint is kept
    state = read_checkpoint(path)           # refuses a folder whose manifest does not match,
                                            # then falls back to the previous one, saying so

A save that fails half-way (a full disk, a crash) leaves the last good checkpoint where it
was and removes its own partial files; its error names the path and the free space there.
A crash between the two renames leaves `.path.prev` whole, and `read_checkpoint` takes it.
Every file's bytes are hashed (BLAKE2b) into the manifest and checked on resume: a checkpoint
overwritten in place, its sizes kept, is refused rather than trained on.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)
MANIFEST = "manifest.json"
STATE = "state.json"


class CheckpointError(RuntimeError):
    """A checkpoint that could not be written, or one that is not whole; the message says where."""


def write_checkpoint(path: str | os.PathLike, write: Callable[[Path], None], state: dict) -> Path:
    """Fill a staging folder beside `path` with write(staging) and the state, then swap it in."""
    staging = stage(path)
    try:
        write(staging)
    except Exception as e:
        raise failed(path, e) from None
    return commit(path, state)


def stage(path: str | os.PathLike) -> Path:
    """A fresh, empty staging folder beside `path` (a crashed save's leftovers removed)."""
    staging = _staging(Path(path))
    shutil.rmtree(staging, ignore_errors=True)
    try:
        staging.mkdir(parents=True)
    except OSError as e:
        raise failed(path, e) from None
    return staging


def commit(path: str | os.PathLike, state: dict) -> Path:
    """The staged files, the state and a manifest of them, swapped in for the checkpoint at `path`."""
    path = Path(path)
    staging, prev = _staging(path), previous(path)
    try:
        _write_json(staging / STATE, state)
        files = {}
        for f in sorted(staging.rglob("*")):
            if f.is_file():  # on disk before the manifest says it is there
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
                files[str(f.relative_to(staging))] = {"size": f.stat().st_size, "blake2b": digest(f)}
        _write_json(staging / MANIFEST, {"version": state.get("version"), "files": files})
        _fsync_dir(staging)
    except Exception as e:
        raise failed(path, e) from None
    if path.exists():  # the last good one becomes the fallback; the one before it goes
        shutil.rmtree(prev, ignore_errors=True)
        os.replace(path, prev)
    os.replace(staging, path)
    _fsync_dir(path.parent)
    return path


def digest(path: Path) -> str:
    """BLAKE2b of a file's bytes, read in 4 MiB pieces."""
    h = hashlib.blake2b(digest_size=32)
    with open(path, "rb") as f:
        while chunk := f.read(4 << 20):
            h.update(chunk)
    return h.hexdigest()


def failed(path: str | os.PathLike, e: BaseException) -> CheckpointError:
    """Remove the staged files of a save that failed; the error names the path and the free space."""
    path = Path(path)
    shutil.rmtree(_staging(path), ignore_errors=True)
    # OSError, or a library's own error for a short write (torch.save's RuntimeError)
    why = e.strerror if isinstance(e, OSError) and e.strerror else f"{type(e).__name__}: {str(e)[:200]}"
    kept = "the last good checkpoint is kept" if (path / MANIFEST).exists() or (previous(path) / MANIFEST).exists() \
        else "there is no earlier checkpoint"
    return CheckpointError(f"checkpoint at {path} failed ({why}); {_free(path)} free there; {kept}")


def _staging(path: Path) -> Path:
    return path.with_name(f".{path.name}.partial")


def previous(path: str | os.PathLike) -> Path:
    """Where the checkpoint before the one at `path` is kept."""
    path = Path(path)
    return path.with_name(f".{path.name}.prev")


def read_checkpoint(path: str | os.PathLike) -> dict:
    """The state of a whole checkpoint at `path`; if it is not whole (missing or changed files, a
    hash that does not match, a crash between the renames), of the previous one, with a warning
    naming what was wrong (and `fallback` in the state). Neither whole: CheckpointError naming both."""
    path = Path(path)
    try:
        return verify(path)
    except CheckpointError as first:
        prev = previous(path)
        if not (prev / MANIFEST).exists():
            raise
        try:
            state = verify(prev)
        except CheckpointError as second:
            raise CheckpointError(f"{first}; the previous checkpoint is not whole either: {second}") from None
        log.warning("%s; resuming from the previous checkpoint, step %s (%s)", first, state["version"], prev)
        return {**state, "fallback": str(first)}


def verify(path: Path) -> dict:
    """The state of the checkpoint at `path`, refused (CheckpointError) unless every file the
    manifest names is there with its size and its content hash."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
        state = json.loads((path / STATE).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path} is not a whole checkpoint: {e}") from None
    for rel, entry in manifest["files"].items():
        f = path / rel
        size, want = (entry, None) if isinstance(entry, int) else (entry["size"], entry["blake2b"])
        if not f.is_file() or f.stat().st_size != size:
            raise CheckpointError(f"{path} is not a whole checkpoint: {rel} is "
                                  f"{'missing' if not f.is_file() else f'{f.stat().st_size} bytes, not {size}'}")
        if want is not None and digest(f) != want:  # a manifest from before hashes has sizes only
            raise CheckpointError(f"{path} is corrupt: {rel} does not match its hash in the manifest "
                                  f"(its bytes changed after the save)")
    if state.get("version") != manifest["version"]:
        raise CheckpointError(f"{path}: state.json says version {state.get('version')}, "
                              f"the manifest {manifest['version']}")
    return {**state, "path": str(path)}


def _write_json(path: Path, data: dict):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=2)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _free(path: Path) -> str:
    for p in (path, *path.parents):
        if p.exists():
            return f"{shutil.disk_usage(p).free / 2**20:.1f} MiB"
    return "unknown"
