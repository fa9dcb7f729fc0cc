"""An ingestion whose checked copy cannot be written is a DiskFull naming the
temporary folder, and nothing is stored."""

from __future__ import annotations

import tempfile

import pytest

import fairq


def test_a_temporary_folder_that_cannot_be_written_is_disk_full_and_nothing_is_stored(q, monkeypatch) -> None:
    def no_room(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "TemporaryFile", no_room)
    with pytest.raises(fairq.DiskFull) as info:
        q.ingest(b'{"event_id": "E1", "body": 1}\n')
    assert "TMPDIR" in str(info.value)
    monkeypatch.undo()
    assert q.events() == []
