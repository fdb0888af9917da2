"""``nlu-engine serve``'s ``--log-*`` flags: what they become, and the one-line errors before
anything listens (the logging itself is tested in ``tests/server/test_message_log.py``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from nlu_engine.cli.main import build_parser
from nlu_engine.cli.serve import log_settings
from nlu_engine.contract.errors import NLUError
from tests.cli.test_cli import assert_user_error, run
from tests.extras import requires_extra

pytestmark = requires_extra("server", "starlette", "uvicorn", "sqlalchemy")


def settings(*flags: str) -> object:
    return log_settings(build_parser().parse_args(["serve", *flags]))


def test_the_flags_become_the_logs_settings() -> None:
    assert settings() is None
    got = settings("--log-messages", "log.db", "--log-redact", "email", "--log-redact", r"re:\d{4,}",
                   "--log-retention-days", "30", "--log-max-rows", "100000")
    assert got.target == "log.db" and got.redact == ("email", r"re:\d{4,}")  # type: ignore[attr-defined]
    assert (got.retention_days, got.max_rows) == (30.0, 100000)  # type: ignore[attr-defined]
    url = settings("--log-messages", "postgresql://bot@db.internal/nlu")
    assert url.target == "postgresql://bot@db.internal/nlu"  # type: ignore[attr-defined]


@pytest.mark.parametrize("flags, words", [
    (["--log-redact", "email"], "--log-redact needs --log-messages DB"),
    (["--log-max-rows", "5", "--log-retention-days", "2"], "--log-retention-days, --log-max-rows needs"),
    (["--log-messages", "x.db", "--log-redact", "re:[a-"], "not a regular expression"),
    (["--log-messages", "x.db", "--log-max-rows", "0"], "--log-max-rows must be at least 1"),
    (["--log-messages", "x.db", "--log-retention-days", "-1"], "positive number of days"),
])
def test_bad_flags_are_one_line_errors(flags: list[str], words: str) -> None:
    with pytest.raises(NLUError, match=words) as error:
        settings(*flags)
    assert "\n" not in str(error.value)


def test_serve_help_lists_the_flags(tmp_path: Path) -> None:
    result = run("serve", "--help", cwd=tmp_path)
    assert result.returncode == 0
    for flag in ("--log-messages", "--log-redact", "--log-retention-days", "--log-max-rows"):
        assert flag in result.stdout


def test_a_database_that_is_not_a_log_stops_serve_with_one_line(
    tmp_path: Path, logreg_archive: Path
) -> None:
    (tmp_path / "notes.txt").write_text("not a database, " * 100)
    other = sqlite3.connect(tmp_path / "app.db")
    other.execute("CREATE TABLE users (name TEXT)")
    other.commit()
    other.close()
    for name, words in [("notes.txt", "is not an nlu-engine message log"),
                        ("app.db", "is not an nlu-engine message log (it holds other tables)"),
                        ("missing/log.db", "does not exist")]:
        result = run("serve", "-m", str(logreg_archive), "--port", "0",
                     "--log-messages", str(tmp_path / name), cwd=tmp_path, timeout=60)
        assert_user_error(result, "--log-messages", words)
    result = run("serve", "-m", str(logreg_archive), "--port", "0", "--log-messages", "log.db",
                 "--log-redact", "re:(", cwd=tmp_path, timeout=60)
    assert_user_error(result, "--log-redact 're:(': not a regular expression")
    assert not (tmp_path / "log.db").exists()
