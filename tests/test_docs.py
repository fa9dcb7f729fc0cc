"""The docs tell the truth: every example in them runs, names are pinned and documented.

How the code blocks of README.md and docs/*.md are checked (write docs to fit):

* A fence tagged ``python`` runs as Python, one tagged ``sh`` or ``console``
  runs in bash. Untagged fences and other tags (``json``, ``text``,
  ``mermaid``) are not run.
* ``<!-- illustrative -->`` on the line before a fence means "do not run":
  signatures, fragments, commands that run until stopped, installs.
* The runnable blocks of one document run in order, in one fresh folder
  (``examples/`` is linked in), like a reader typing them: Python blocks
  share one namespace; a shell block sees the ``export`` lines of the shell
  blocks before it. ``fairq``, ``python`` and ``python3`` run this
  checkout's code. A block that fails (an exception, a non-zero exit, a
  traceback) fails the test; a ``console`` transcript may show a command
  being refused, so there only its shown output and the absence of a
  traceback count.
* Shown output is checked: in a ``console`` block the lines after a
  ``$ command`` line are that command's output; a ``text`` fence right after
  a runnable block is that block's output. Each shown line must appear in
  the output, in order (other lines may come between); ``...`` inside a line
  stands for any text (times, pids).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import fairq
from fairq.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")

PUBLIC = [
    "ACK", "FAIL", "RETRY", "AuditEntry", "Backoff", "Busy", "ClockError", "Conflict", "Enqueued",
    "EventInfo", "FairqError", "Inbox", "InvalidInput", "Lease", "LeaseExpired", "LeaseLost",
    "Outcome", "Queue", "Receipt", "RedriveRefused", "SchemaError", "Settled", "StaleLease",
    "State", "Stats",
    "Misfire", "Schedule",
    "Client", "RemoteError", "Unavailable",
    "Blocked", "FlowInfo", "Purged", "Worker", "Job", "Handled", "Retry", "Fail", "Release",
    "Tasks", "Task",
    "UnknownSchedule",
    "StoreError", "DiskFull", "ReadOnly", "Corrupt", "UsageError", "TransientError",
    "Policy", "PolicyMismatch", "TenantInfo", "ResultNotReady",
]


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_all_is_pinned() -> None:
    assert sorted(fairq.__all__) == sorted(PUBLIC)
    for name in PUBLIC:
        assert hasattr(fairq, name)


def test_every_public_name_and_method_has_a_docstring() -> None:
    for name in PUBLIC:
        obj = getattr(fairq, name)
        if isinstance(obj, fairq.Outcome):
            continue
        assert (obj.__doc__ or "").strip(), name
        for attr, member in vars(obj).items() if isinstance(obj, type) else []:
            if not attr.startswith("_") and callable(member):
                assert (member.__doc__ or "").strip(), f"{name}.{attr}"


def test_every_error_defaults_to_its_docstring() -> None:
    assert str(fairq.Busy()) == fairq.Busy.__doc__.strip()
    for cls in (fairq.Conflict, fairq.InvalidInput, fairq.LeaseLost, fairq.ClockError,
                fairq.RedriveRefused, fairq.Busy, fairq.SchemaError):
        assert issubclass(cls, fairq.FairqError)
    assert issubclass(fairq.StaleLease, fairq.LeaseLost) and issubclass(fairq.LeaseExpired, fairq.LeaseLost)
    assert issubclass(fairq.InvalidInput, ValueError)


def test_the_readme_opens_with_the_two_setup_commands() -> None:
    first = blocks("sh")[0].strip().splitlines()
    assert first[0].startswith("python3 -m pip install -e . && fairq demo")
    assert first[1].startswith("python3 -m pip install -e '.[test]' && python3 -m pytest -q")
    assert README.index("```sh") < README.index("```python")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    install, test = (part.strip() for part in blocks("sh")[0].splitlines()[1].split("#")[0].split("&&"))
    assert re.search(rf"^{re.escape(install)}$", ci, flags=re.M)
    assert re.search(rf"^checked {re.escape(test)}$", ci, flags=re.M)
    assert "-eq 5" in ci


def test_the_readme_example_runs(tmp_path) -> None:
    code = blocks("python")[0]
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode == 0, done.stderr
    assert "handling order-1001" in done.stdout and "handling order-1002" in done.stdout
    assert "'acked': 2" in done.stdout


def test_every_cli_command_is_documented() -> None:
    doc = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert commands
    for name in commands:
        assert f"## `fairq {name}" in doc, name


def test_docs_name_every_crash_point_verb() -> None:
    # Every named write transaction in the code has crash points
    # <verb>.before_commit / <verb>.after_commit; the docs list them all.
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "src" / "fairq").rglob("*.py"))
    verbs = set(re.findall(r'(?:transaction|write)\("([a-z_]+)"', source))
    assert {"enqueue", "claim", "settle", "extend", "redrive", "receive"} <= verbs
    crash_section = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8").split("## Crash points")[1]
    listed = set(re.findall(r"`([a-z_]+)`", crash_section))
    assert verbs <= listed, verbs - listed


# -- every block of every document runs ------------------------------------------------------------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN_AS = {"python": "python", "sh": "sh", "console": "console"}
FENCE = re.compile(r"^```([A-Za-z0-9_-]*)[^\n]*\n(.*?)^```[ \t]*$", flags=re.S | re.M)
ILLUSTRATIVE = "<!-- illustrative -->"


def doc_blocks(text: str) -> list[dict[str, object]]:
    """The runnable blocks of a document, in order, each with the output it shows (or None)."""
    found: list[dict[str, object]] = []
    previous_end = 0
    for match in FENCE.finditer(text):
        lang, code = match.group(1), match.group(2)
        before = text[:match.start()].rstrip().splitlines()[-1:] or [""]
        gap = text[previous_end:match.start()]
        if lang == "text" and found and found[-1]["end"] == previous_end and not gap.strip():
            found[-1]["shown"] = code
        elif lang in RUN_AS and before[0].strip() != ILLUSTRATIVE:
            line = text.count("\n", 0, match.start()) + 1
            found.append({"lang": lang, "code": code, "line": line, "end": match.end(), "shown": None})
        previous_end = match.end()
    return found


def console_parts(code: str) -> tuple[str, list[str]]:
    """A console block's commands (as one script) and the output lines it shows."""
    commands, shown = [], []
    lines = code.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("$ "):
            command = lines[i][2:]
            while command.endswith("\\") and i + 1 < len(lines):  # a continued command line
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            commands.append(command)
        elif lines[i].strip():
            shown.append(lines[i])
        i += 1
    return "\n".join(commands) + "\n", shown


def shows(output: str, shown: list[str]) -> str | None:
    """None if every shown line appears in `output` in order, else the first one missing."""
    rest = output.splitlines()
    for want in (w.rstrip() for w in shown if w.strip()):
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("...")))
        while rest and not pattern.search(rest[0]):
            rest.pop(0)
        if not rest:
            return want
        rest.pop(0)
    return None


# The documents with runnable blocks; one with none (a glossary, a diagram) has nothing to run.
DOCS_WITH_EXAMPLES = [doc for doc in DOCS if doc_blocks(doc.read_text(encoding="utf-8"))]


def test_the_documents_with_examples_are_the_ones_run() -> None:
    # Guards the block parser: were it to find nothing, every example would pass unrun.
    names = {doc.name for doc in DOCS_WITH_EXAMPLES}
    assert {"README.md", "cli.md", "http.md", "worker.md", "inbox.md", "schedules.md"} <= names, names
    for doc in set(DOCS) - set(DOCS_WITH_EXAMPLES):
        text = doc.read_text(encoding="utf-8")
        for lang in RUN_AS:
            assert text.count(f"```{lang}\n") == text.count(f"{ILLUSTRATIVE}\n```{lang}\n"), (doc.name, lang)


BLOCK_SECONDS = 60  # a block still running after this long fails (e.g. a worker without --until-idle)

DRIVER = r"""
import contextlib, io, json, os, signal, subprocess, sys, traceback
blocks = json.load(sys.stdin)
namespace = {"__name__": "__doc__"}
exports = []
prelude = 'fairq() { "$PY" -m fairq "$@"; }\npython3() { "$PY" "$@"; }\npython() { "$PY" "$@"; }\nset -e\n'
limit = int(os.environ["BLOCK_SECONDS"])
results = []

class RanTooLong(BaseException):
    pass

def too_long(*_):
    raise RanTooLong(f"still running after {limit} s")

signal.signal(signal.SIGALRM, too_long)
for block in blocks:
    if block["lang"] == "python":
        out = io.StringIO()
        signal.alarm(limit)
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(block["code"], f"block at line {block['line']}", "exec"), namespace)
            results.append({"ok": True, "output": out.getvalue()})
        except BaseException:
            results.append({"ok": False, "output": out.getvalue() + traceback.format_exc()})
        finally:
            signal.alarm(0)
    else:
        console = block["lang"] == "console"  # a transcript may show a refusal: no set -e
        start = prelude.replace("set -e", "") if console else prelude
        script = start + "".join(e + "\n" for e in exports) + block["script"]
        shell = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True, start_new_session=True)
        try:
            output, _ = shell.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            os.killpg(shell.pid, signal.SIGKILL)
            output = shell.communicate()[0] + f"\nstill running after {limit} s"
        exports += [l for l in block["script"].splitlines() if l.startswith("export ")]
        ok = "Traceback" not in output if console else shell.returncode == 0
        results.append({"ok": ok, "output": output})
    if not results[-1]["ok"]:
        break
sys.stdout.write(json.dumps(results))
sys.stdout.flush()
os._exit(0)  # threads a block left behind (a worker) do not keep this process alive
"""


# What the prose around a block says its output holds, checked on the same run: (document, a line
# of the block) -> the texts its output holds; the last one ends it.
SAID = {
    ("README.md", "fairq init"): [
        '{"created": 4, "duplicates": 1, "lines": 5}',  # E0001 is there twice
        '"book": 15000, "pen": 2000, "total": 17000',  # the first `work`
        "E0004     -     1    quarantined  1",  # `events` lists it with its generation
        '{"event_id": "E0004", "generation": 2}',  # the redrive
        '"toy": 3000, "total": 20000, "effects": 4}, "states": {"acked": 4}',  # `work --accept toy`
        '{"created": 0, "duplicates": 5, "lines": 5}',  # loading the file again creates nothing
    ],
}


@pytest.mark.parametrize("doc", DOCS_WITH_EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_in_the_docs_runs_and_shows_its_real_output(doc: Path, tmp_path: Path) -> None:
    blocks = doc_blocks(doc.read_text(encoding="utf-8"))
    for block in blocks:
        if block["lang"] == "console":
            block["script"], block["console_shown"] = console_parts(block["code"])
        else:
            block["script"] = block["code"]
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if k not in ("FAIRQ_DB", "FAIRQ_DEBUG", "FAIRQ_TOKEN")}
    env.update(PY=sys.executable, PYTHONPATH=str(ROOT / "src"), BLOCK_SECONDS=str(BLOCK_SECONDS))
    driver = subprocess.Popen([sys.executable, "-c", DRIVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=tmp_path, env=env, text=True, start_new_session=True)
    try:
        out, err = driver.communicate(json.dumps(blocks), timeout=BLOCK_SECONDS * (len(blocks) + 1))
    finally:
        try:
            os.killpg(driver.pid, signal.SIGKILL)  # whatever a block started and left running
        except ProcessLookupError:
            pass
    assert driver.returncode == 0, err
    results = json.loads(out)
    for block, result in zip(blocks, results):
        where = f"{doc.name} block at line {block['line']}"
        assert result["ok"], f"{where} failed:\n{result['output']}"
        shown = block.get("console_shown") or (block["shown"] or "").splitlines()
        missing = shows(result["output"], shown)
        assert missing is None, f"{where}: shows {missing!r}, which its output lacks:\n{result['output']}"
        for (name, line), said in SAID.items():
            if name == doc.name and line in block["code"].splitlines():
                for text in said:
                    assert text in result["output"], f"{where}: the text says {text!r}:\n{result['output']}"
                assert result["output"].rstrip().endswith(said[-1]), f"{where}:\n{result['output']}"
    assert len(results) == len(blocks)
    said_here = [line for name, line in SAID if name == doc.name]
    assert all(any(line in b["code"].splitlines() for b in blocks) for line in said_here), said_here


def test_shown_output_must_match_in_order() -> None:
    assert shows("a\nb 12:00\nc\n", ["a", "b ...", "c"]) is None
    assert shows("a\nc\nb\n", ["a", "b", "c"]) == "c"
    assert console_parts("$ fairq init\nready\n$ fairq status \\\n  --json\n{}\n") == (
        "fairq init\nfairq status  --json\n", ["ready", "{}"])
    text = "x\n<!-- illustrative -->\n```python\nboom()\n```\n```sh\necho hi\n```\n\n```text\nhi\n```\n"
    (block,) = doc_blocks(text)
    assert block["lang"] == "sh" and block["shown"] == "hi\n"
