"""The ``kms`` Typer app run in process with Typer's ``CliRunner``: output and exit codes without
a Python start-up per command. A subprocess is only for what a runner cannot show (signals,
terminals, concurrent processes)."""

from __future__ import annotations

from typer.testing import CliRunner, Result


def kms(*args: str, input: str | None = None, **env: str) -> Result:  # noqa: A002 - CliRunner's name
    """``kms ARGS`` in this process (``KMS_DB_PATH``/``KMS_CONFIG`` come from the test's environment);
    ``input`` is what the person types at a prompt."""
    from kmscli.main import app

    return CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1", **env}).invoke(app, list(args), input=input)


def ok(result: Result) -> Result:
    """The command succeeded: exit 0 and nothing raised past the CLI's own error handling."""
    assert result.exit_code == 0 and result.exception is None, (
        f"kms exited {result.exit_code}\n{result.stdout}\n{result.stderr}\n{result.exception!r}"
    )
    return result


def refused(result: Result, code: int | None = None) -> Result:
    """A clear refusal: a non-zero exit chosen by the CLI (``typer.Exit``), never an escaped exception."""
    assert result.exit_code != 0 and isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.stderr
    if code is not None:
        assert result.exit_code == code, (result.exit_code, result.stderr)
    return result


def said(text: str) -> str:
    """Output with rich's line wrapping undone: the console's width is fixed when it is created,
    and a pytest-xdist worker runs with ``COLUMNS=80``."""
    return " ".join(text.split())


def interruptible() -> None:
    """``preexec_fn`` for a child a test will Ctrl-C: SIGINT as a terminal gives it. A test run started in
    the background (``cmd &``, some CI runners) ignores SIGINT, and a child would inherit that."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
