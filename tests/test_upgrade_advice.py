"""What a read-only opening of an older file tells the user to do."""

from __future__ import annotations

import pytest

import fairq
from helpers import build_v1


def test_the_refusal_of_an_older_schema_says_to_upgrade_with_the_applications_own_settings(db_path) -> None:
    """`fairq init` alone would store the default retry policy for a file that predates
    stored policies, so the message names the application's own opening first."""
    build_v1(db_path)
    with pytest.raises(fairq.SchemaError) as refused:
        fairq.Queue(db_path, readonly=True)
    message = str(refused.value)
    assert "the application's own settings" in message and "max_attempts=" in message
    assert "`fairq init` and then `fairq policy set`" in message
    assert "(e.g. `fairq init`)" not in message
