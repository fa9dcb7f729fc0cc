"""fairq: durable, fair, fenced work queues in one SQLite file."""

import logging

from .errors import (
    Busy,
    ClockError,
    Conflict,
    FairqError,
    InvalidInput,
    LeaseExpired,
    LeaseLost,
    RedriveRefused,
    SchemaError,
    StaleLease,
)
from .errors import RemoteError, Unavailable
from .errors import UnknownSchedule
from .errors import Corrupt, DiskFull, PolicyMismatch, ReadOnly, StoreError, TransientError, UsageError
from .http import Client
from .inbox import Inbox
from .kernel.policy import Backoff, Policy
from .api.queue import Queue
from .types import (
    ACK,
    FAIL,
    RETRY,
    AuditEntry,
    Enqueued,
    EventInfo,
    Lease,
    Misfire,
    Outcome,
    Receipt,
    Schedule,
    Settled,
    State,
    Stats,
)
from .types import Blocked, FlowInfo, Purged
from .worker import Fail, Handled, Job, Retry, Worker

__version__ = "0.1.0"

# A library adds no handlers of its own; this one only silences Python's
# last-resort printing until the application configures logging.
logging.getLogger("fairq").addHandler(logging.NullHandler())

__all__ = [
    "ACK",
    "FAIL",
    "RETRY",
    "AuditEntry",
    "Backoff",
    "Busy",
    "ClockError",
    "Conflict",
    "Enqueued",
    "EventInfo",
    "FairqError",
    "Inbox",
    "InvalidInput",
    "Lease",
    "LeaseExpired",
    "LeaseLost",
    "Outcome",
    "Queue",
    "Receipt",
    "RedriveRefused",
    "SchemaError",
    "Settled",
    "StaleLease",
    "State",
    "Stats",
    "Misfire",
    "Schedule",
    "Client",
    "RemoteError",
    "Unavailable",
    "Blocked",
    "FlowInfo",
    "Purged",
    "Worker",
    "Job",
    "Handled",
    "Retry",
    "Fail",
    "UnknownSchedule",
    "StoreError",
    "DiskFull",
    "ReadOnly",
    "Corrupt",
    "UsageError",
    "TransientError",
    "Policy",
    "PolicyMismatch",
]
