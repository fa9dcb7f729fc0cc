"""The PostgreSQL store does everything the backend protocols ask, with the
same parameters, and importing fairq does not import its driver."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import pytest

from fairq.stores import backend
from fairq.stores.postgres.reads import PgReads
from fairq.stores.postgres.schedules import PgSchedules
from fairq.stores.postgres.store import PgStore, PgTxn
from helpers import ROOT

PAIRS = [(backend.Store, PgStore), (backend.WriteTxn, PgTxn), (backend.Snapshot, PgReads),
         (backend.ScheduleStatements, PgSchedules)]


@pytest.mark.parametrize(("protocol", "implementation"), PAIRS, ids=lambda c: c.__name__)
def test_the_postgres_store_has_every_method_the_backend_names_with_the_same_parameters(
        protocol: type, implementation: type) -> None:
    for name in [n for n, value in vars(protocol).items() if callable(value) and not n.startswith("_")]:
        assert hasattr(implementation, name), f"{implementation.__name__} lacks {name}"
        wanted = [(p.name, p.kind) for p in inspect.signature(getattr(protocol, name)).parameters.values()]
        found = [(p.name, p.kind) for p in inspect.signature(getattr(implementation, name)).parameters.values()]
        assert found == wanted, f"{implementation.__name__}.{name}"


def test_importing_fairq_and_opening_sqlite_do_not_import_psycopg(tmp_path) -> None:
    code = ("import sys, fairq; fairq.Queue(sys.argv[1]).close(); fairq.Inbox(sys.argv[2]).close(); "
            "print('psycopg' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "q.db"), str(tmp_path / "i.db")],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
