"""examples/web_app.py: a FastAPI app whose lifespan runs an AsyncWorker over its tasks; a POST
enqueues a send_email task and answers its id, a GET answers the task's result (or its state)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from fastapi.testclient import TestClient

import fairq
from helpers import load_file, run_check

ROOT = Path(__file__).resolve().parent.parent


def web_app() -> ModuleType:
    return load_file(ROOT / "examples" / "web_app.py", "web_app")


def test_a_posted_email_is_sent_by_the_lifespans_worker_and_its_result_is_served(tmp_path: Path) -> None:
    db = tmp_path / "web.db"
    with TestClient(web_app().create_app(db)) as client:
        posted = client.post("/emails", json={"to": "ada@example.com", "subject": "hi", "account": "acme"})
        assert posted.status_code == 202
        event_id = posted.json()["id"]
        got = client.get(f"/emails/{event_id}", params={"wait": 5})  # the wait only stops a hang
        assert got.status_code == 200
        assert got.json() == {"sent_to": "ada@example.com", "subject": "hi", "attempt": 1}
        assert client.get(f"/emails/{event_id}").json() == got.json()  # the result stays
    with fairq.Queue(db) as q:
        info = q.get(event_id)
        assert info.kind == "send_email" and info.flow == "to:ada@example.com" and info.state is fairq.State.ACKED
        assert q.result(event_id) == got.json()
        assert q.stats().counts["inflight"] == 0  # the worker stopped with the app, holding nothing


def test_the_get_answers_409_for_a_failed_email_202_while_one_waits_and_404_for_an_unknown_id(
        tmp_path: Path) -> None:
    with TestClient(web_app().create_app(tmp_path / "web.db")) as client:
        first = client.post("/emails", json={"to": "nobody", "subject": "one"}).json()["id"]
        failed = client.get(f"/emails/{first}", params={"wait": 5})
        assert failed.status_code == 409
        assert failed.json() == {"id": first, "state": "quarantined", "reason": "not an address: 'nobody'"}
        # The next email to the same address waits behind the quarantined one: its flow is blocked.
        second = client.post("/emails", json={"to": "nobody", "subject": "two"}).json()["id"]
        waiting = client.get(f"/emails/{second}")
        assert waiting.status_code == 202 and waiting.json()["state"] == "ready"
        unknown = client.get("/emails/never-sent")
        assert unknown.status_code == 404 and unknown.json()["error"] == "no such email"


def test_an_idempotency_key_makes_a_repeated_post_answer_the_same_id_and_enqueue_nothing(tmp_path: Path) -> None:
    email = {"to": "bob@example.com", "subject": "receipt", "account": "bits"}
    with TestClient(web_app().create_app(tmp_path / "web.db")) as client:
        once = client.post("/emails", json=email, headers={"Idempotency-Key": "order-7-receipt"})
        again = client.post("/emails", json=email, headers={"Idempotency-Key": "order-7-receipt"})
        other = client.post("/emails", json={**email, "subject": "changed"},
                            headers={"Idempotency-Key": "order-7-receipt"})
        assert once.json() == {"id": "order-7-receipt", "created": True}
        assert again.json() == {"id": "order-7-receipt", "created": False}
        assert other.status_code == 409
        assert client.get("/emails/order-7-receipt", params={"wait": 5}).status_code == 200
    with fairq.Queue(tmp_path / "web.db") as q:
        assert q.stats().totals["enqueued"] == 1


def test_the_example_reproduces_its_transcript() -> None:
    done = run_check(ROOT / "examples" / "web_app.py")
    assert "9/9 results as expected" in done.stdout and "DIFF" not in done.stdout
