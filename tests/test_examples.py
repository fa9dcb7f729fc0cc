"""The examples run and reproduce their documented results."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_fair_relay_reproduces_every_scenario() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "fair_relay.py"), "--check"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "15/15 scenarios as expected" in done.stdout
    assert "DIFF" not in done.stdout
