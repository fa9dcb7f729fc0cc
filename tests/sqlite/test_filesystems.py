"""Real filesystems that fill up or cannot be written: the typed errors a
caller meets, and what still works. Each test mounts a small tmpfs, which
needs root with CAP_SYS_ADMIN; elsewhere it is skipped (the same errors are
provoked through SQLite in test_store_errors)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import fairq
from helpers import fairq_cli


def _mount(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[tuple[Path, Callable[[], None]]]:
    """A 512 KiB tmpfs, and a function that remounts it read-only."""
    where = tmp_path / "fs"
    where.mkdir()
    try:
        done = _mount("-t", "tmpfs", "-o", "size=512k", "tmpfs", str(where))
    except OSError as exc:
        pytest.skip(f"no mount command: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN): {done.stderr.strip()}")

    def read_only() -> None:
        assert _mount("-o", "remount,ro", str(where)).returncode == 0

    try:
        yield where, read_only
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def test_a_full_filesystem_is_disk_full_and_what_was_stored_stays(small_fs) -> None:
    where, _ = small_fs
    q = fairq.Queue(where / "q.db")
    stored = 0
    with pytest.raises(fairq.DiskFull, match="free space"):
        for stored in range(1000):
            q.enqueue(f"e{stored}", {"pad": "x" * 3000}, now=0)
    assert 0 < stored < 1000
    assert q.get(f"e{stored}") is None
    assert q.stats(now=0).counts["ready"] == stored
    q.close()


def test_a_queue_on_a_read_only_filesystem_is_read_but_never_written(small_fs) -> None:
    where, read_only = small_fs
    with fairq.Queue(where / "q.db") as q:
        q.enqueue("x", {"v": 1}, now=0)
    read_only()
    with pytest.raises(fairq.ReadOnly, match="folder cannot be written"):
        fairq.Queue(where / "q.db")
    with fairq.Queue(where / "q.db", readonly=True) as ro:
        assert ro.get("x").body == {"v": 1}
    looked = fairq_cli("--db", str(where / "q.db"), "status", "--json", cwd=where.parent)
    assert looked.returncode == 0, looked.stderr
    changed = fairq_cli("--db", str(where / "q.db"), "redrive", "x", "--expected-generation", "1",
                        "--reason", "r", cwd=where.parent)
    assert changed.returncode == 1
    assert "cannot be written" in changed.stderr and "Traceback" not in changed.stderr
