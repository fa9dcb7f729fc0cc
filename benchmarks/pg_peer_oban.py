"""oban (oban-py, the Python port of Oban) as a peer in benchmarks/pg_peers.py, run in an interpreter of its own.

oban requires Python >= 3.12 and the benchmark may run on an older one, so oban's side runs as
subprocesses of a separate interpreter: this file is both the script those subprocesses run
(stdlib and oban only) and the parent's handle on them (stdlib only, oban never imported).

    <python3.12> benchmarks/pg_peer_oban.py fill URL JOBS
        installs oban's schema with its own migration API (oban.schema.install) and enqueues
        JOBS no-op jobs numbered 0..JOBS-1 through Oban.enqueue_many, in chunks of 1,000;
    <python3.12> benchmarks/pg_peer_oban.py work URL LIMIT
        one worker process: Oban(pool=..., queues={"default": LIMIT}) with a no-op worker,
        embedded as oban's documentation shows (its connection pool is opened first, then
        "ready" is written to stdout); on the line "go" from stdin it calls oban.start(); on
        the line "stop" it calls oban.stop() (which waits for running jobs and writes their
        pending completions) and writes one line of JSON: the job numbers its worker saw,
        the monotonic time the first ran and the time stop() returned.

The interpreter: $FAIRQ_OBAN_PYTHON, else the first Python >= 3.12 found (~/.pyenv's versions,
then python3.12 and python3.13 on PATH) in which oban imports; install it there with
(`<python3.12> -m pip install oban`, which brings psycopg 3 and psycopg_pool, its driver).
"""

from __future__ import annotations

import asyncio
import functools
import glob
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPT = str(Path(__file__).resolve())
CHUNK = 1_000  # jobs per enqueue_many call while filling
POOL_MIN = 4  # connections each worker's pool opens before the clock (oban's own default opens 1, grows to 10)

# -- the 3.12 side: what the subprocesses run ----------------------------------------


class Seen:
    """The job numbers this process's worker saw, and when the first one ran (monotonic)."""

    numbers: list[int] = []
    first = 0.0

    @classmethod
    def add(cls, number: int) -> None:
        if not cls.numbers:
            cls.first = time.monotonic()
        cls.numbers.append(number)


def noop_worker() -> Any:
    """The no-op worker class, registered with oban under the same name in every process."""
    from oban import worker

    @worker(queue="default")
    class Noop:
        async def process(self, job: Any) -> None:
            Seen.add(job.args["i"])

    return Noop


async def fill(url: str, jobs: int) -> None:
    from oban import Oban
    from oban.schema import install

    pool = await Oban.create_pool(url)
    try:
        await install(pool)
        client = Oban(pool=pool)  # no queues: client mode, it only enqueues
        noop = noop_worker()
        for start in range(0, jobs, CHUNK):
            await client.enqueue_many([noop.new({"i": i}) for i in range(start, min(jobs, start + CHUNK))])
    finally:
        await pool.close()


async def work(url: str, limit: int) -> None:
    from oban import Oban

    noop_worker()
    pool = await Oban.create_pool(url, min_size=POOL_MIN)
    try:
        oban = Oban(pool=pool, queues={"default": limit})
        print("ready", flush=True)
        if (await asyncio.to_thread(sys.stdin.readline)).strip() != "go":
            return  # the parent gave up before the start
        await oban.start()
        await asyncio.to_thread(sys.stdin.readline)  # "stop", or end of input: the parent went away
        await oban.stop()
        returned = time.monotonic()
    finally:
        await pool.close()
    print(json.dumps({"seen": Seen.numbers, "first": Seen.first, "returned": returned}), flush=True)


def main(argv: list[str]) -> None:
    command, url, number = argv
    asyncio.run(fill(url, int(number)) if command == "fill" else work(url, int(number)))


# -- the parent's side ---------------------------------------------------------------


def candidates() -> list[str]:
    """Interpreters that may hold oban: $FAIRQ_OBAN_PYTHON alone when set, else ~/.pyenv's
    3.12 and later (oldest first), then python3.12 and python3.13 on PATH."""
    if chosen := os.environ.get("FAIRQ_OBAN_PYTHON"):
        return [chosen]
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")),
                   key=lambda p: [int(x) for x in Path(p).parent.parent.name.split(".") if x.isdigit()])
    return found + [exe for name in ("python3.12", "python3.13") if (exe := shutil.which(name))]


@functools.cache
def probe() -> tuple[str, str, str] | str:
    """(the interpreter, oban's version, its Python's version) for the first candidate that
    imports oban, or why none does."""
    why = []
    code = "import platform, oban; print(oban.__version__, platform.python_version())"
    for exe in candidates():
        try:
            done = subprocess.run([exe, "-c", code], capture_output=True, text=True, timeout=120)
        except OSError as exc:
            why.append(f"{exe} does not run ({exc})")
            continue
        if done.returncode == 0:
            version, py = done.stdout.split()
            return exe, version, py
        lines = done.stderr.strip().splitlines() or ["no message"]
        why.append(f"{exe}: {lines[-1] if 'Error' in lines[-1] else lines[0]}")
    if not why:
        return "no Python >= 3.12 found (oban requires it; set FAIRQ_OBAN_PYTHON to one)"
    return "oban does not import in any Python >= 3.12 found: " + "; ".join(why) + \
        " (install it with: <python3.12> -m pip install oban)"


def python() -> str:
    found = probe()
    assert not isinstance(found, str), found
    return found[0]


def run_fill(url: str, jobs: int) -> None:
    exe = python()
    done = subprocess.run([exe, SCRIPT, "fill", url, str(jobs)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"oban: filling failed: {done.stderr.strip()[-2000:]}")


def tell(p: subprocess.Popen[str], line: str) -> None:
    """Write a line to a worker process; one that has already exited is found out by its exit code."""
    assert p.stdin is not None
    try:
        p.stdin.write(line + "\n")
        p.stdin.flush()
    except BrokenPipeError:
        pass


class Workers:
    """`processes` oban worker processes of queue limit `limit`, held at a barrier over their pipes:
    each says "ready" once its pool is open; start() waits for all of them, then writes "go" to each."""

    def __init__(self, url: str, limit: int, processes: int) -> None:
        exe = python()
        self.logs = [tempfile.TemporaryFile("w+") for _ in range(processes)]
        self.procs = [subprocess.Popen([exe, SCRIPT, "work", url, str(limit)], stdin=subprocess.PIPE,
                                       stdout=subprocess.PIPE, stderr=log, text=True) for log in self.logs]

    def start(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for p in self.procs:
            assert p.stdout is not None
            ready, _, _ = select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))
            line = p.stdout.readline() if ready else ""
            if line.strip() != "ready":
                raise RuntimeError(f"oban: a worker process failed to start: {self.error() or 'timed out'}")
        for p in self.procs:
            tell(p, "go")

    def alive(self) -> bool:
        return any(p.poll() is None for p in self.procs)

    def exitcodes(self) -> list[int | None]:
        return [p.poll() for p in self.procs]

    def finish(self, timeout: float) -> list[tuple[str, list[int], float, float]]:
        """Write "stop" to each process; what each reports: ("ok", job numbers seen, monotonic time
        its oban.stop() returned, time its first job ran)."""
        for p in self.procs:
            tell(p, "stop")
        outs = []
        for p in self.procs:
            out, _ = p.communicate(timeout=timeout)
            if p.returncode != 0 or not out.strip():
                raise RuntimeError(f"oban: a worker process exited with {p.returncode}: {self.error()}")
            report = json.loads(out.strip().splitlines()[-1])
            outs.append(("ok", report["seen"], report["returned"], report["first"]))
        return outs

    def error(self) -> str:
        """The last lines a worker process wrote to stderr, if any did."""
        for log in self.logs:
            log.seek(0)
            if text := log.read().strip():
                return text[-2000:]
        return ""

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for log in self.logs:
            log.close()


if __name__ == "__main__":
    main(sys.argv[1:])
