"""Over HTTP, a stored body the server cannot decode reaches the Client as an UndecodableBody,
as from a local Queue, never as a dict that looks like a real body; a real body shaped like
one stays a dict."""

from __future__ import annotations

import sqlite3

import fairq
from fairq.types import UndecodableBody
from helpers import TOKEN, raw

POISON = '{"n":' + "9" * 4301 + "}"  # one digit past the int-digit limit of a default Python


def poison(path, table: str, key: str) -> None:
    """Write what an older process without the int-digit limit could have stored."""
    conn = sqlite3.connect(path)
    sql = {"event": "UPDATE event SET body = :body WHERE event_id = :key",
           "schedule": "UPDATE schedule SET body = :body WHERE name = :key"}[table]
    conn.execute(sql, {"body": POISON, "key": key})
    conn.commit()
    conn.close()


def is_undecodable(body: object) -> bool:
    return isinstance(body, UndecodableBody) and body.text == POISON and "4300" in body.problem


def test_client_get_and_events_rebuild_an_undecodable_body(client: fairq.Client, server, db_path) -> None:
    client.enqueue("bad", {"n": 1})
    poison(db_path, "event", "bad")
    assert is_undecodable(client.get("bad").body)
    (listed,) = client.events()
    assert is_undecodable(listed.body)
    assert server.queue.get("bad") == client.get("bad")


def test_the_wire_form_of_an_undecodable_body_is_null_beside_its_own_key(client, server, db_path) -> None:
    client.enqueue("bad", {"n": 1})
    poison(db_path, "event", "bad")
    answer = raw(server, "GET", "/v1/events/bad", token=TOKEN)
    assert answer.status == 200
    assert answer.json["body"] is None
    assert answer.json["undecodable_body"]["text"] == POISON


def test_an_extended_lease_carries_an_undecodable_body_as_such(client: fairq.Client, db_path) -> None:
    client.enqueue("bad", {"n": 1})
    lease = client.claim()
    poison(db_path, "event", "bad")
    assert is_undecodable(client.extend(lease).body)


def test_a_schedule_with_an_undecodable_body_is_rebuilt_as_such(client: fairq.Client, db_path) -> None:
    client.schedules.add("hourly", every=3600, body={"n": 1})
    poison(db_path, "schedule", "hourly")
    assert is_undecodable(client.schedules.get("hourly").body)


def test_a_real_body_shaped_like_an_undecodable_one_stays_a_dict(client: fairq.Client) -> None:
    body = {"text": "x", "problem": "y", "undecodable_body": {"text": "x", "problem": "y"}}
    client.enqueue("real", body)
    assert client.get("real").body == body
    assert client.claim().body == body
