"""A password in a PostgreSQL URL (user:password@, ?password=, ?sslpassword=)
never shows: not in open errors, Unavailable messages, the command line's
output, nor a refused URL's message. A URL parameter the driver would refuse
is InvalidInput naming it, before anything connects."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.parse

import pytest

import fairq
from helpers import ROOT
from pgcluster import free_port, require_psycopg

psycopg = require_psycopg()

SRC = str(ROOT / "src")
SECRETS = ("hunter2pass", "s3cretQuery", "sslS3cret")


def with_secrets(url: str) -> str:
    """`url` with a password in each place a URL can hold one."""
    parts = urllib.parse.urlsplit(url)
    netloc = f"{parts.username or 'postgres'}:{SECRETS[0]}@{parts.hostname}:{parts.port}"
    query = "&".join(filter(None, [parts.query, f"password={SECRETS[1]}", f"sslpassword={SECRETS[2]}"]))
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc, query=query))


def assert_hidden(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text, text


def chain(exc: BaseException | None) -> str:
    """Every message in an exception's chain of causes."""
    texts = []
    while exc is not None:
        texts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(texts)


def test_a_refused_port_is_unavailable_without_any_secret() -> None:
    url = with_secrets(f"postgresql://app@127.0.0.1:{free_port()}/db")
    with pytest.raises(fairq.Unavailable) as info:
        fairq.Queue(url)
    assert "***" in str(info.value)
    assert_hidden(str(info.value))


def test_a_call_that_loses_its_connection_says_unavailable_without_any_secret(pg_url: str) -> None:
    with fairq.Queue(with_secrets(pg_url)) as q:  # the test server trusts: the password is not checked
        q.enqueue("e", {})
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE pid <> pg_backend_pid() AND query NOT ILIKE '%%pg_stat_activity%%' "
                          "AND datname = current_database() AND application_name = ''")
        with pytest.raises(fairq.Unavailable) as info:
            q.stats()
        assert_hidden(str(info.value))
        assert_hidden(repr(q))


def test_a_malformed_url_is_invalid_input_without_the_secret_it_holds() -> None:
    for url in (f"postgresql://app:{SECRETS[0]}%zz@127.0.0.1/db", f"postgresql://app@[::1/db?password={SECRETS[1]}"):
        with pytest.raises(fairq.InvalidInput) as info:
            fairq.Queue(url)
        assert_hidden(chain(info.value))


def test_the_command_line_never_prints_a_secret(pg_url: str) -> None:
    for url in (with_secrets(f"postgresql://app@127.0.0.1:{free_port()}/db"), with_secrets(pg_url)):
        for argv in (["status"], ["init"], ["status"]):
            proc = subprocess.run([sys.executable, "-m", "fairq", "--db", url, *argv], capture_output=True,
                                  text=True, timeout=60, env={**os.environ, "PYTHONPATH": SRC})
            assert_hidden(proc.stdout + proc.stderr)


@pytest.mark.parametrize(("parameter", "field", "says"), [
    ("connect_timeout=abc", "connect_timeout", "integer"),
    ("keepalives_idle=soon", "keepalives_idle", "integer"),
    ("Fairq_prepare=off", "Fairq_prepare", "did you mean fairq_prepare"),
    ("FAIRQ_IDLE_IN_TRANSACTION_TIMEOUT=1", "FAIRQ_IDLE_IN_TRANSACTION_TIMEOUT",
     "did you mean fairq_idle_in_transaction_timeout"),
    ("no_such_option=1", "no_such_option", "no_such_option"),
])
def test_a_bad_url_parameter_is_invalid_input_naming_it_and_nothing_is_written(
        pg_url: str, parameter: str, field: str, says: str) -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Queue(f"{pg_url}&{parameter}")
    assert info.value.field == field and says in str(info.value)
    with pytest.raises(fairq.InvalidInput):
        fairq.Inbox(f"{pg_url}&{parameter}")
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()").fetchone()[0] == 0


def test_a_bad_port_is_invalid_input_naming_it() -> None:
    with pytest.raises(fairq.InvalidInput) as info:
        fairq.Queue("postgresql://app@127.0.0.1:abc/db")
    assert info.value.field == "port"
