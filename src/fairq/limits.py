"""The limits and defaults every layer shares, in one place.

Values only: no imports from fairq, so any module may read them.
"""

from __future__ import annotations

#: The most items one HTTP call, worker step or purge chunk takes. In-process
#: batches (enqueue_many, claim_many, settle_many) have no cap.
MAX_BATCH = 10_000
#: Seconds a purged event's id is remembered after its ack (see Queue.purge).
DEDUP_WINDOW = 30 * 86_400.0
#: The longest event id, flow or other identifier, in characters.
MAX_ID_CHARS = 255
#: The longest reason (settle, redrive, policy change), in characters.
MAX_REASON_CHARS = 4096
#: The longest kind (a task name) an event may carry, in characters.
MAX_KIND_CHARS = 200
#: The largest retry budget an event or a queue may have.
MAX_ATTEMPTS = 1_000_000
#: The deepest nesting of a JSON body.
MAX_DEPTH = 100
#: A body's default size cap in bytes of canonical JSON (Queue(max_body_bytes=)).
DEFAULT_MAX_BODY_BYTES = 256 * 1024
#: The most rows one listing page returns (events, flows, audit).
MAX_PAGE = 1000
#: The largest count, generation or audit id a call takes (claim_many's n,
#: expected_generation, audit's after): far past any real value, inside a
#: signed 64-bit column.
MAX_COUNT = 2**62
#: The largest body cap a Queue may be given (max_body_bytes), and so the
#: largest body stored anywhere (an ingest line, a schedule's instances).
MAX_BODY_CEILING = 1 << 30
#: The most events one Queue.events call lists (its `limit`, the CLI's --limit).
MAX_EVENTS_LISTED = 1_000_000
#: The most audit rows one Queue.audit call answers.
MAX_AUDIT_LISTED = 10_000_000
#: The most flows one Queue.flows call answers, and the most a stats() top list names.
MAX_FLOWS_LISTED = 10_000
#: Queue.ingest's and `fairq ingest`'s default caps: the file's bytes, its non-blank lines.
INGEST_MAX_BYTES = 16 * 1024 * 1024
INGEST_MAX_LINES = 10_000

#: The longest `fairq serve` holds a GET /v1/wait request (seconds): a
#: Client's wait asks again until its own timeout.
WAIT_CAP = 20.0
