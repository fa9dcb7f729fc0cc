"""An open refused for naming another policy leaves the SQLite file byte for byte as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

import fairq

SLOW = fairq.Backoff(base=4.0, factor=3.0, cap=50.0, jitter=False)


def file_bytes(path: Path) -> dict[str, bytes]:
    """The database file and any WAL beside it, byte for byte."""
    return {p.name: p.read_bytes() for p in path.parent.iterdir() if p.name.startswith(path.name)}


@pytest.mark.parametrize("field, value", [
    ("max_attempts", 9), ("backoff", fairq.Backoff(base=1.5)), ("lease_seconds", 31),
])
def test_an_open_naming_another_policy_leaves_the_file_untouched(db_path, field, value) -> None:
    fairq.Queue(db_path, max_attempts=2, backoff=SLOW, lease_seconds=7).close()
    before = file_bytes(db_path)
    with pytest.raises(fairq.PolicyMismatch):
        fairq.Queue(db_path, **{field: value})
    assert file_bytes(db_path) == before
