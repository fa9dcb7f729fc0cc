"""examples/lease_fencing.py reproduces its fenced timeline, and --check catches a difference."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from helpers import load_file, run_check

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "lease_fencing.py"


@pytest.fixture
def example():
    return load_file(EXAMPLE, "lease_fencing")


def test_the_example_reproduces_every_step_of_its_timeline() -> None:
    done = run_check(EXAMPLE)
    assert "13/13 steps as expected" in done.stdout
    assert "DIFF" not in done.stdout


def test_the_expected_timeline_is_the_documented_one(example) -> None:
    steps = {(t, who, what): result for t, who, what, result in example.EXPECTED}
    assert steps[(9, "worker-a", "claim")] == {"claimed": None}
    assert steps[(10, "worker-a", "claim")]["generation"] == 1
    assert steps[(14, "worker-b", "claim")] == {"claimed": None}
    assert steps[(15, "worker-b", "claim")]["generation"] == 2
    assert steps[(16, "worker-a", "complete generation 1")] == {"refused": "StaleLease", "results": 0}
    assert steps[(16, "worker-b", "complete generation 2")]["results"] == 1
    assert steps[(16, "worker-b", "complete generation 2 again")]["results"] == 1
    assert len(steps[(16, "reader", "result table")]["rows"]) == 1
    assert steps[(19, "worker-b", "claim")] == {"claimed": None}
    assert steps[(20, "worker-b", "claim")]["claimed"].endswith("T00:00:20Z")
    assert [s[-3:-1] for s in steps[(50, "reader", "misfires")]["slots"]] == ["20", "30", "40"]


@pytest.mark.parametrize("change", ["alter", "drop", "add"])
def test_check_exits_non_zero_on_any_difference(example, capsys, change) -> None:
    original = copy.deepcopy(example.EXPECTED)
    if change == "alter":
        example.EXPECTED[5][3] = {"refused": "LeaseExpired", "results": 0}
    elif change == "drop":
        example.EXPECTED.pop()
    else:
        example.EXPECTED.append([60, "reader", "nothing", {}])
    assert example.main(["--check"]) == 1
    assert "DIFF" in capsys.readouterr().out
    assert example.main([]) == 0  # without --check it only reports
    example.EXPECTED[:] = original
    assert example.main(["--check"]) == 0
