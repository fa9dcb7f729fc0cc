"""No traceback ever reaches a user of the fairq command.

Every command (found in the argparse parser, so a new command is covered
without editing this file) is run with a table of bad databases, bad files,
bad numbers and unknown flags. Each run must end with exit status 0, 1 or 2
and, when refused, one readable `fairq: ...` or usage message on stderr:
never a Python traceback and never an "internal error". The runs are
in-process through fairq.cli.main (fast); a few real subprocesses check
what only a real process shows (a closed pipe, a handler that fails to
import).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import fairq
from fairq.cli import build_parser, main

ROOT = Path(__file__).resolve().parent.parent

# What a required positional gets when a case is not about it.
GOOD_POSITIONAL = {"file": "orders.jsonl", "event_id": "E1", "flow": "F", "name": "nightly",
                   "handler": "handlers_ok:handle"}
# What a required option gets when a case is not about it.
GOOD_OPTION = {"--expected-generation": "1", "--reason": "why", "--older-than": "1d", "--every": "60"}
# Options that keep a command from running until stopped.
BOUNDED = {("work",): ["--until-idle"]}

BAD_NUMBERS = ["abc", "-1", "0", "nan", "inf", "-inf", "1e999", "99999999999999999999", "0.5", ""]

BAD_FILES = {  # name -> how to make it in the test's folder
    "a missing file": lambda d: d / "missing",
    "a directory": lambda d: _mkdir(d / "folder"),
    "an empty file": lambda d: _write(d / "empty", b""),
    "a garbage file": lambda d: _write(d / "garbage", b"\x00\xffnot sqlite, not json\n" * 300),
    "a foreign SQLite file": lambda d: _foreign(d / "foreign.sqlite"),
}

HANDLER_MODULES = {
    "handlers_ok.py": "def handle(job):\n    return None\n\nnot_callable = 3\n",
    "broken_syntax.py": "def handle(job:\n    pass\n",
    "raises_at_import.py": "raise RuntimeError('no config here')\n",
    "exits_at_import.py": "import sys\nsys.exit(3)\n",
}
BAD_HANDLERS = ["nomodule:handle", "broken_syntax:handle", "raises_at_import:handle", "exits_at_import:handle",
                "no_colon", ":handle", "handlers_ok:", "handlers_ok:missing", "handlers_ok:not_callable"]


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _foreign(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE events (id INTEGER PRIMARY KEY, what TEXT)")
    return path


Commands = dict[tuple[str, ...], argparse.ArgumentParser]


def all_commands(parser: argparse.ArgumentParser, words: tuple[str, ...] = ()) -> Commands:
    found: Commands = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.update(all_commands(child, (*words, name)) or {(*words, name): child})
    return found


COMMANDS = all_commands(build_parser())


def good_args(words: tuple[str, ...], parser: argparse.ArgumentParser, *, skip: str = "") -> list[str]:
    """The command with every required argument filled by a harmless value (except `skip`)."""
    argv = list(words)
    for action in parser._actions:
        if action.dest == skip or skip in action.option_strings:
            continue
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            argv.append(GOOD_POSITIONAL.get(action.dest, "x"))
        elif action.required:
            argv += [action.option_strings[0], GOOD_OPTION.get(action.option_strings[0], "1")]
    for group in parser._mutually_exclusive_groups:
        if group.required and not any(o in argv for a in group._group_actions for o in a.option_strings):
            option = group._group_actions[0].option_strings[0]
            if option != skip:
                argv += [option, GOOD_OPTION.get(option, "1")]
    return argv + BOUNDED.get(words, [])


def numeric_options(parser: argparse.ArgumentParser) -> list[str]:
    numeric = ("int", "float", "duration")
    return [a.option_strings[0] for a in parser._actions
            if a.option_strings and getattr(a.type, "__name__", "") in numeric]


def uses_database(words: tuple[str, ...]) -> bool:
    return "--db" in COMMANDS[words]._option_string_actions


def cases() -> list[tuple[str, list[str], str]]:
    """(case id, argv after `--db <db>`, which database: 'good' or a BAD_FILES name)."""
    table = []
    for words, parser in COMMANDS.items():
        name = " ".join(words)
        table.append((f"{name} --bogus", [*good_args(words, parser), "--bogus"], "good"))
        if uses_database(words):
            table += [(f"{name} on {bad}", good_args(words, parser), bad) for bad in BAD_FILES]
        for option in numeric_options(parser):
            table += [(f"{name} {option} {n!r}", [*good_args(words, parser, skip=option), option, n], "good")
                      for n in BAD_NUMBERS]
        for action in parser._actions:
            if action.dest == "file" and not action.option_strings:
                table += [(f"{name} FILE {bad}", [*good_args(words, parser, skip="file"), f"@{bad}"], "good")
                          for bad in BAD_FILES]
            if action.dest == "handler":
                table += [(f"{name} {h}", [*good_args(words, parser, skip="handler"), h], "good")
                          for h in BAD_HANDLERS]
    table += [("demo --keep-in a garbage file", ["demo", "--keep-in", "@a garbage file"], "good"),
              ("serve --token-file missing", ["serve", "--token-file", "@a missing file"], "good"),
              ("serve --token-file a directory", ["serve", "--token-file", "@a directory"], "good"),
              ("serve --token-file a garbage file", ["serve", "--token-file", "@a garbage file"], "good"),
              ("serve --no-auth --port 99999", ["serve", "--no-auth", "--port", "99999"], "good"),
              ("serve --no-auth --port -1", ["serve", "--no-auth", "--port", "-1"], "good"),
              ("serve --no-auth --host nowhere", ["serve", "--no-auth", "--host", "no.such.host.invalid"], "good"),
              ("schedules add --body not json", ["schedules", "add", "n", "--every", "60", "--body", "{"], "good"),
              ("schedules add --cron nonsense", ["schedules", "add", "n", "--cron", "61 * * * *"], "good"),
              ("schedules add --tz nowhere", ["schedules", "add", "n", "--cron", "@hourly", "--tz", "Mars/Base"],
               "good"),
              ("enqueue --id-pattern a bad regex", ["enqueue", "orders.jsonl", "--id-pattern", "("], "good"),
              ("events --state nonsense", ["events", "--state", "nonsense"], "good"),
              ("no command at all", [], "good")]
    return table


class Hung(BaseException):
    """A command ran past its time (a BaseException, so main's last resort does not swallow it)."""


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A queue with one ready event, made once; each test gets its own copy."""
    path = tmp_path_factory.mktemp("template") / "good.db"
    with fairq.Queue(path) as q:
        q.enqueue("E0", {"n": 0}, flow="F")
    return path


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, good_db: Path) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FAIRQ_DB", raising=False)
    monkeypatch.delenv("FAIRQ_TOKEN", raising=False)
    monkeypatch.delenv("FAIRQ_DEBUG", raising=False)
    for name, text in HANDLER_MODULES.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "orders.jsonl").write_text('{"event_id": "E1", "body": {"n": 1}, "flow": "F"}\n')
    for made in good_db.parent.glob("good.db*"):  # the file, and a WAL if one is left
        shutil.copyfile(made, tmp_path / made.name)
    yield tmp_path
    for name in HANDLER_MODULES:
        sys.modules.pop(name[:-3], None)
    logger = logging.getLogger("fairq")  # `work` logs to the stderr of its first run
    for handler in [h for h in logger.handlers if getattr(h, "_fairq_cli", False)]:
        logger.removeHandler(handler)


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    def hung(*_: object) -> None:
        raise Hung(" ".join(argv))
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        status = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("case", cases(), ids=lambda c: c[0])
def test_no_command_shows_a_traceback_whatever_it_is_given(case, folder: Path, capsys) -> None:
    _, argv, db = case
    wanted = {db} | {a[1:] for a in argv if a.startswith("@")}  # the bad files this case names
    where = {bad: str(make(folder)) for bad, make in BAD_FILES.items() if bad in wanted}
    argv = [where[a[1:]] if a.startswith("@") and a[1:] in where else a for a in argv]
    database = str(folder / "good.db") if db == "good" else where[db]
    status, out, err = run_in_process(["--db", database, *argv], capsys)
    assert "Traceback" not in err + out
    assert "internal error" not in err, err
    assert status in (0, 1, 2), (status, err)
    if status:
        first = err.strip().splitlines()[0] if err.strip() else ""
        assert first.startswith(("fairq: ", "usage: ")), err


def test_every_command_is_in_the_table() -> None:
    named = {c[0].split(" --bogus")[0] for c in cases() if c[0].endswith("--bogus")}
    assert named == {" ".join(w) for w in COMMANDS}
    assert {("status",), ("work",), ("schedules", "add")} <= set(COMMANDS)


def test_a_handler_that_fails_to_import_is_named_in_one_line(folder: Path, capsys) -> None:
    status, _, err = run_in_process(["--db", "good.db", "work", "broken_syntax:handle", "--until-idle"], capsys)
    assert status == 1
    assert err.startswith("fairq: handler 'broken_syntax:handle': cannot import broken_syntax: SyntaxError")
    assert len(err.strip().splitlines()) == 1
    status, _, err = run_in_process(["--db", "good.db", "work", "raises_at_import:handle", "--until-idle"], capsys)
    assert err.strip() == ("fairq: handler 'raises_at_import:handle': cannot import raises_at_import: "
                           "RuntimeError: no config here")


def test_an_unexpected_error_is_one_line_unless_debugging(folder: Path, capsys, monkeypatch) -> None:
    def boom(args: argparse.Namespace) -> int:  # stands in for a bug inside a command
        raise ZeroDivisionError("division by zero")
    monkeypatch.setattr("fairq.cli.build_parser", lambda: _with_func(build_parser(), "status", boom))
    status, _, err = run_in_process(["--db", "good.db", "status"], capsys)
    assert status == 1
    assert err.strip().splitlines() == [
        "fairq: internal error: ZeroDivisionError: division by zero (FAIRQ_DEBUG=1 shows the traceback)"]
    monkeypatch.setenv("FAIRQ_DEBUG", "1")
    status, _, err = run_in_process(["--db", "good.db", "status"], capsys)
    assert status == 1 and "Traceback" in err and "ZeroDivisionError" in err


def _with_func(parser: argparse.ArgumentParser, command: str, func: object) -> argparse.ArgumentParser:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices[command].set_defaults(func=func)
    return parser


def test_db_is_accepted_after_the_subcommand_and_wins_over_the_global_one(folder: Path, capsys) -> None:
    with fairq.Queue(folder / "other.db") as q:
        q.enqueue("X1", {}, flow="G")
        q.enqueue("X2", {}, flow="G")
    status, out, _ = run_in_process(["status", "--db", "other.db", "--json"], capsys)
    assert status == 0 and '"ready": 2' in out
    status, out, _ = run_in_process(["--db", "good.db", "status", "--db", "other.db", "--json"], capsys)
    assert status == 0 and '"ready": 2' in out
    status, out, _ = run_in_process(["--db", "good.db", "status", "--json"], capsys)
    assert status == 0 and '"ready": 1' in out
    status, out, _ = run_in_process(["schedules", "list", "--db", "other.db"], capsys)
    assert status == 0


def test_fairq_db_from_the_environment_is_used_when_no_db_is_given(folder: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("FAIRQ_DB", str(folder / "good.db"))
    status, out, _ = run_in_process(["status", "--json"], capsys)
    assert status == 0 and '"ready": 1' in out


# -- real processes --------------------------------------------------------------------------------

def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FAIRQ_DB", "FAIRQ_DEBUG")}
    return {**env, "PYTHONPATH": str(ROOT / "src")}


@pytest.mark.parametrize(("command", "reader", "lines"), [
    ("status", "true", 0),  # the reader is gone before fairq has started
    ("events --limit 5000", "head -1", 1),  # the reader goes away in the middle of a long listing
    ("demo", "head -2", 2),
])
def test_a_closed_pipe_ends_the_command_quietly(command: str, reader: str, lines: int, folder: Path) -> None:
    with fairq.Queue(folder / "good.db") as q:
        q.enqueue_many([(f"P{i}", {"n": i}) for i in range(3000)])
    done = subprocess.run(f'"{sys.executable}" -m fairq --db good.db {command} | {reader}; '
                          'echo "status=${PIPESTATUS[0]}" >&2',
                          shell=True, executable="/bin/bash", cwd=folder, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert len(done.stdout.splitlines()) == lines
    # 141 when the closed pipe was met; 0 if everything was written before the reader left
    assert done.stderr.strip().splitlines() in (["status=141"], ["status=0"]), done.stderr


def test_a_handler_with_a_syntax_error_is_one_line_from_a_real_process(folder: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "fairq", "--db", "good.db", "work", "broken_syntax:handle"],
                          cwd=folder, env=_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.startswith("fairq: handler 'broken_syntax:handle': cannot import broken_syntax: SyntaxError")
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_locked_database_is_one_line_naming_the_write_lock(folder: Path, capsys, monkeypatch) -> None:
    import functools

    monkeypatch.setattr("fairq.cli._common.Queue", functools.partial(fairq.Queue, busy_timeout=0.2))
    holder = sqlite3.connect(folder / "good.db", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's writer, holding the write lock
    try:
        status, _, err = run_in_process(["--db", "good.db", "redrive", "E0", "--expected-generation", "0",
                                         "--reason", "why"], capsys)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert status == 1
    assert err.count("database is locked") == 1, err
    assert "another process or connection held the write lock" in err
    assert len(err.strip().splitlines()) == 1
