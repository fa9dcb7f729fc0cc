"""The CLI's logging: its stderr handler, and one record per line, key=value text or JSON.

fairq's own messages are already `name key=value ...` (e.g.
`handler.error event_id=o5 attempts=1 error='KeyError: x'`): the name becomes
`event=`, the pairs are kept. Any other message (a handler's own line) becomes
`msg="..."`. A traceback is kept on the same line (`traceback="..."`, newlines
escaped) so a record never spans lines.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from ._common import when

#: A fairq message: a dotted name, then key=value pairs (values quoted by %r when they hold spaces).
_FAIRQ_MESSAGE = re.compile(r"^([a-z_]+(?:\.[a-z_]+)+)((?: [a-z_]+=(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S*))*)$")
_PAIR = re.compile(r" ([a-z_]+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\S*)")


def _time(record: logging.LogRecord) -> str:
    return when(record.created)


def _traceback(formatter: logging.Formatter, record: logging.LogRecord) -> str | None:
    if record.exc_info:
        return formatter.formatException(record.exc_info)
    return record.exc_text or None


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The handler a fairq command adds to the root logger (configure_logging
    replaces it, not the application's own handlers)."""

    _fairq_cli = True  # the mark tests look for to take the handler off again


class KeyValueFormatter(logging.Formatter):
    """`time=... level=... logger=... pid=... event=name key=value ...` (or `msg="..."`), one line."""

    def __init__(self, prefix: str = "") -> None:
        super().__init__()
        self.prefix = prefix

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        head = f"time={_time(record)} level={record.levelname} logger={record.name} pid={record.process}"
        matched = _FAIRQ_MESSAGE.match(message)
        body = f"event={matched.group(1)}{matched.group(2)}" if matched else f"msg={json.dumps(message)}"
        text = f"{self.prefix}{head} {body}"
        traceback = _traceback(self, record)
        return text if traceback is None else f"{text} traceback={json.dumps(traceback)}"


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, pid, message, and for fairq's
    messages event and each key=value pair (as text); traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        out: dict[str, Any] = {"time": _time(record), "level": record.levelname, "logger": record.name,
                               "pid": record.process, "message": message}
        matched = _FAIRQ_MESSAGE.match(message)
        if matched:
            out["event"] = matched.group(1)
            for key, value in _PAIR.findall(matched.group(2)):
                if key not in out:
                    out[key] = value[1:-1] if value[:1] in "'\"" and len(value) > 1 else value
        traceback = _traceback(self, record)
        if traceback is not None:
            out["traceback"] = traceback
        return json.dumps(out, ensure_ascii=False)
