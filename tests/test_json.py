"""Strict JSON: one reader for every outside text (files, HTTP bodies, arguments)."""

from __future__ import annotations

import pytest

from fairq._json import StrictJSONError, canonical, loads_strict


@pytest.mark.parametrize("text, path, problem", [
    ('{"a": 1, "a": 2}', "a", "is a duplicate key"),
    ('{"body": {"items": [{"sku": 1}, {"sku": 2, "sku": 3}]}}', "body.items[1].sku", "is a duplicate key"),
    ('{"x": NaN}', "x", "NaN is not JSON"),
    ('[1, Infinity]', "[1]", "Infinity is not JSON"),
    ("-Infinity", "", "-Infinity is not JSON"),
    ("{", "", "is not JSON: Expecting property name enclosed in double quotes at column 2"),
    ("[" * 100_000, "", "is nested too deeply"),
])
def test_what_json_loads_lets_through_is_refused_with_its_place(text, path, problem) -> None:
    with pytest.raises(StrictJSONError) as info:
        loads_strict(text)
    assert (info.value.path, info.value.problem) == (path, problem)
    assert isinstance(info.value, ValueError)


def test_strict_json_reads_what_plain_json_reads() -> None:
    assert loads_strict('{"b": [1, 2.5, "é", null, true], "a": {}}') == {"a": {}, "b": [1, 2.5, "é", None, True]}


def test_canonical_text_sorts_keys_and_keeps_int_and_float_apart() -> None:
    assert canonical({"b": 1, "a": 1.0}) == '{"a":1.0,"b":1}'
    with pytest.raises(ValueError):
        canonical(float("nan"))
