"""A FastAPI app: a request enqueues a task and answers with its id; another reads its result.

The app's lifespan opens the queue and runs a fairq.aio.AsyncWorker over the
task registry `tasks` beside the web server, and stops it on shutdown:

    POST /emails          {"to": ..., "subject": ..., "account": ...}  -> 202 {"id": ...}
                          (an Idempotency-Key header is the event id: a request sent
                          again enqueues nothing new and answers the same id)
    GET  /emails/{id}     200 the task's result; 202 {"state": ...} while it is not done;
                          409 {"state", "reason"} when it failed (quarantined or discarded);
                          404 for an id never enqueued. ?wait=S waits up to S seconds (at most
                          10) for the result first.

Each email is a `send_email` event (its kind), in the flow of its recipient
(mails to one address go out in the order sent) and the tenant of its
account (accounts are served fairly, however much one of them sends).

    python examples/web_app.py            # drive the app with FastAPI's test client, print the transcript
    python examples/web_app.py --check    # and exit 1 on any difference from EXPECTED
    FAIRQ_DB=web.db uvicorn --app-dir examples web_app:app   # serve it (needs uvicorn)

Needs fastapi (and httpx for the test client): ``python3 -m pip install fastapi httpx``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

import fairq
import fairq.aio

tasks = fairq.Tasks()
#: The longest ?wait= a request may ask for, in seconds.
MAX_WAIT = 10.0


@tasks.task(max_attempts=3, timeout=30.0, backoff=fairq.Backoff(base=0.05, factor=2.0, cap=1.0))
async def send_email(job: fairq.Job) -> dict[str, Any]:
    """Send one email; the result says to whom and on which attempt."""
    to = job.body["to"]
    if "@" not in to:
        raise fairq.Fail(f"not an address: {to!r}")  # quarantined at once: retrying cannot help
    await asyncio.sleep(0.001)  # the mail server's answer
    return {"sent_to": to, "subject": job.body["subject"], "attempt": job.attempts}


class Email(BaseModel):
    to: str
    subject: str = ""
    account: str = "default"


def create_app(db: str | os.PathLike[str]) -> FastAPI:
    """The app on the queue file `db`; its lifespan opens the queue and runs the worker."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with fairq.aio.AsyncQueue(db) as q:
            worker = fairq.aio.AsyncWorker(q, tasks, concurrency=4, idle_max=0.1)
            running = asyncio.create_task(worker.run(signals=False))  # the server handles signals
            app.state.queue = q
            try:
                yield
            finally:
                worker.stop()  # running jobs finish and are settled, then run() returns
                await running

    app = FastAPI(title="fairq web app", lifespan=lifespan)

    @app.post("/emails", status_code=202)
    async def post_email(email: Email, request: Request, idempotency_key: str | None = Header(default=None)) -> Any:
        q: fairq.aio.AsyncQueue = request.app.state.queue
        try:
            made = await send_email.enqueue(q, dict(email), event_id=idempotency_key,
                                            flow=f"to:{email.to}", tenant=email.account)
        except fairq.InvalidInput as bad:  # an address or account fairq cannot take as a flow or tenant name
            return JSONResponse({"error": str(bad)}, status_code=422)
        except fairq.Conflict as reused:  # the key was used for another email (or another account)
            return JSONResponse({"error": str(reused)}, status_code=409)
        return {"id": made.event_id, "created": made.created}

    @app.get("/emails/{event_id}")
    async def get_email(event_id: str, request: Request, wait: float = 0.0) -> Any:
        q: fairq.aio.AsyncQueue = request.app.state.queue
        try:
            if wait > 0:
                return await q.wait(event_id, timeout=min(wait, MAX_WAIT))
            return await q.result(event_id)
        except TimeoutError:  # still waiting, or running
            info = await q.get(event_id)
            if info is not None:
                return JSONResponse({"id": event_id, "state": info.state.value}, status_code=202)
            return JSONResponse({"id": event_id, "error": "no such email"}, status_code=404)
        except fairq.ResultNotReady as not_ready:
            if not_ready.state is None:
                return JSONResponse({"id": event_id, "error": "no such email"}, status_code=404)
            body = {"id": event_id, "state": not_ready.state.value, "reason": not_ready.reason}
            failed = not_ready.state in (fairq.State.QUARANTINED, fairq.State.DISCARDED)
            return JSONResponse(body, status_code=409 if failed else 202)
        except fairq.InvalidInput as bad:  # an id fairq could never have made
            return JSONResponse({"id": event_id, "error": str(bad)}, status_code=404)

    return app


#: What uvicorn serves (web_app:app): the queue in $FAIRQ_DB, else ./fairq.db (opened by the lifespan).
app = create_app(os.environ.get("FAIRQ_DB", "fairq.db"))


EXPECTED: dict[str, Any] = {
    "POST ada": [202, True],
    "POST ada again (same key)": [202, False],
    "POST bob": [202, True],
    "POST broken": [202, True],
    "GET ada": [200, {"attempt": 1, "sent_to": "ada@example.com", "subject": "welcome"}],
    "GET bob": [200, {"attempt": 1, "sent_to": "bob@example.com", "subject": "receipt"}],
    "GET broken": [409, "quarantined"],
    "GET unknown": [404, "no such email"],
    "acked": 2,
}


def story(db: Path) -> dict[str, Any]:
    """Drive the app through FastAPI's test client (its lifespan runs the worker), as a browser would."""
    from fastapi.testclient import TestClient

    seen: dict[str, Any] = {}
    with TestClient(create_app(db)) as client:
        ids = {}
        for name, email, key in (("ada", {"to": "ada@example.com", "subject": "welcome", "account": "acme"}, "m-1"),
                                 ("ada again (same key)", {"to": "ada@example.com", "subject": "welcome",
                                                           "account": "acme"}, "m-1"),
                                 ("bob", {"to": "bob@example.com", "subject": "receipt", "account": "bits"}, None),
                                 ("broken", {"to": "nobody", "subject": "?", "account": "bits"}, None)):
            answer = client.post("/emails", json=email, headers={"Idempotency-Key": key} if key else {})
            seen[f"POST {name}"] = [answer.status_code, answer.json()["created"]]
            ids[name] = answer.json()["id"]
        for name in ("ada", "bob", "broken"):
            answer = client.get(f"/emails/{ids[name]}", params={"wait": 5})
            body = answer.json()
            seen[f"GET {name}"] = [answer.status_code, body.get("state", body)]
        answer = client.get("/emails/never-sent")
        seen["GET unknown"] = [answer.status_code, answer.json()["error"]]
    with fairq.Queue(db) as q:
        seen["acked"] = q.stats().counts["acked"]
    return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if anything differs from EXPECTED")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as directory:
        result = story(Path(directory) / "web.db")
    for key, value in result.items():
        print(f"{key}: {json.dumps(value, sort_keys=True)}")
    diffs = [key for key, value in EXPECTED.items() if result.get(key) != value]
    for key in diffs:
        print(f"DIFF {key}: {json.dumps(result.get(key), sort_keys=True)} (expected {json.dumps(EXPECTED[key])})")
    print(f"{len(EXPECTED) - len(diffs)}/{len(EXPECTED)} results as expected")
    return 1 if args.check and diffs else 0


if __name__ == "__main__":
    sys.exit(main())
