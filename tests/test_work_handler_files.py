"""`fairq work path/to/file.py:FUNCTION` imports the file as the module it is under the
current directory, or says to give a module name; `--log-level DEBUG` shows why an
import failed, with its traceback."""

from __future__ import annotations

import fairq

from helpers import fairq_cli


def test_a_handler_given_as_a_file_path_runs(tmp_path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "handlers.py").write_text("def handle(event):\n    return None\n")
    with fairq.Queue(tmp_path / "q.db") as q:
        q.enqueue("e1", {"n": 1})
    done = fairq_cli("--db", "q.db", "work", "jobs/handlers.py:handle", "--until-empty", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "acked 1" in done.stderr
    with fairq.Queue(tmp_path / "q.db") as q:
        assert q.get("e1").state is fairq.State.ACKED


def test_a_file_outside_the_current_directory_says_to_give_a_module_name(tmp_path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "h.py").write_text("def handle(event):\n    return None\n")
    (tmp_path / "here").mkdir()
    fairq.Queue(tmp_path / "here" / "q.db").close()
    done = fairq_cli("--db", "q.db", "work", "../elsewhere/h.py:handle", "--until-empty", cwd=tmp_path / "here")
    assert done.returncode == 1 and "give a module name" in done.stderr and "Traceback" not in done.stderr
    missing = fairq_cli("--db", "q.db", "work", "nowhere.py:handle", cwd=tmp_path / "here")
    assert missing.returncode == 1 and "there is no file nowhere.py" in missing.stderr


def test_log_level_debug_shows_an_import_errors_traceback(tmp_path) -> None:
    (tmp_path / "broken.py").write_text("import a_module_that_is_not_there\n\ndef handle(event):\n    pass\n")
    fairq.Queue(tmp_path / "q.db").close()
    plain = fairq_cli("--db", "q.db", "work", "broken:handle", cwd=tmp_path)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    assert "No module named 'a_module_that_is_not_there'" in plain.stderr
    debug = fairq_cli("--db", "q.db", "work", "broken:handle", "--log-level", "DEBUG", cwd=tmp_path)
    assert debug.returncode == 1 and "Traceback" in debug.stderr and "broken.py" in debug.stderr
