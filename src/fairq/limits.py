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
#: The deepest nesting of a JSON body.
MAX_DEPTH = 100
#: A body's default size cap in bytes of canonical JSON (Queue(max_body_bytes=)).
DEFAULT_MAX_BODY_BYTES = 256 * 1024
#: The most rows one listing page returns (events, flows, audit).
MAX_PAGE = 1000
