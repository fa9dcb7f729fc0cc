"""fairq: durable, fair, fenced work queues in one SQLite file or a PostgreSQL database.

The public names and __all__ only; each is defined in the module it is imported from.
"""

import logging

from .api.queue import Queue
from .errors import (
    Busy,
    ClockError,
    Conflict,
    Corrupt,
    DiskFull,
    FairqError,
    InvalidInput,
    LeaseExpired,
    LeaseLost,
    PolicyMismatch,
    ReadOnly,
    RedriveRefused,
    RemoteError,
    ResultNotReady,
    SchemaError,
    StaleLease,
    StoreError,
    TransientError,
    Unavailable,
    UnknownSchedule,
    UsageError,
)
from .http import Client
from .inbox import Inbox
from .kernel.policy import Backoff, Policy
from .types import (
    ACK,
    FAIL,
    RETRY,
    AuditEntry,
    Blocked,
    Enqueued,
    EventInfo,
    FlowInfo,
    Lease,
    Misfire,
    Outcome,
    Purged,
    Receipt,
    Schedule,
    Settled,
    State,
    Stats,
    TenantInfo,
)
from .worker import Fail, Handled, Job, Release, Retry, Worker
from .tasks import Task, Tasks  # after .worker: fairq.worker's modules import fairq.tasks
from . import testing  # fairq.testing.queue() and drain(): after Queue, the worker and tasks, which it uses

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
    "TenantInfo",
    "Purged",
    "Worker",
    "Job",
    "Handled",
    "Retry",
    "Fail",
    "Release",
    "Tasks",
    "Task",
    "UnknownSchedule",
    "StoreError",
    "DiskFull",
    "ReadOnly",
    "Corrupt",
    "UsageError",
    "TransientError",
    "Policy",
    "PolicyMismatch",
    "ResultNotReady",
]
