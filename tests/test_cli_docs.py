"""docs/cli.md against the real command line: every option it shows for a command
exists on that command, and every command's options are on the page."""

import argparse
import re
from pathlib import Path

import pytest

from xcep.cli import build_parser

DOC = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()
COMMANDS = ["events", "filter", "xseq", "xquery", "xscl"]


def _actions(command: str) -> list:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.choices and "xscl" in a.choices)
    return sub.choices[command]._actions


def _options(command: str) -> set[str]:
    """The options ``--help`` shows (old spellings, hidden there, are not among them)."""
    return {o for a in _actions(command) if a.help != argparse.SUPPRESS for o in a.option_strings}


def _section(command: str) -> str:
    """The bullet of ``xcep COMMAND`` under "Per command"."""
    match = re.search(rf"^- `xcep {command}`:(.*?)(?=^- |^\n|\Z)", DOC, re.S | re.M)
    assert match, command
    return match.group(1)


SHARED = {
    "--input-format",
    "--errors",
    "--max-depth",
    "--max-attributes",
    "--record-path",
    "--progress",
    "--no-progress",
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_the_page_shows_exists(command):
    shown = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-n)\b", _section(command)))
    assert shown, command
    assert shown <= _options(command), shown - _options(command)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_option_of_a_command_is_on_the_page(command):
    documented = set(re.findall(r"(--[a-z][a-z-]*|-n)\b", _section(command))) | SHARED
    missing = _options(command) - documented - {"-h", "--help"}
    assert not missing, f"xcep {command}: {sorted(missing)} not in docs/cli.md"


def test_old_spellings_are_on_the_page():
    """Deprecated aliases are hidden from --help and listed under "One vocabulary"."""
    section = DOC[DOC.index("## One vocabulary") :]
    for command in COMMANDS:
        for action in _actions(command):
            if action.help == argparse.SUPPRESS:
                for option in action.option_strings:
                    assert f"xcep {command} {option}" in section.replace("\n", " "), option


def test_the_shared_options_are_every_commands():
    for command in COMMANDS:
        assert _options(command) >= SHARED, command
    for option in SHARED:
        assert f"`{option}" in DOC


@pytest.mark.parametrize(
    "args, stdin, code",
    [
        (["events"], b"<a/>", 0),
        (["events", "--errors", "deadletter:DEAD"], b"<a><b></a>\n<c/>", 0),
        (["events"], b"<a><b></a>\n<c/>", 1),
        (["events", "/no/such/file.xml"], b"", 1),
        (["filter", "--filters", "BAD"], b"<a/>", 1),
        (["filter", "--filters", "BAD", "--strict"], b"<a/>", 1),
        (["xquery", "-n", "1 div 0"], b"", 1),
        (["events", "--no-such-option"], b"", 2),
        (["filter", "--filters", "BAD", "--max-entries", "0"], b"<a/>", 2),
        (["xseq", "/["], b"<a/>", 2),
        (["xquery", "-n", "$nope"], b"", 2),
    ],
)
def test_exit_codes_are_the_documented_ones(tmp_path, args, stdin, code):
    import subprocess
    import sys

    bad = tmp_path / "bad.txt"
    bad.write_text("a\t/[\n")
    dead = f"deadletter:{tmp_path / 'dead.jsonl'}"
    args = [{"BAD": str(bad), "deadletter:DEAD": dead}.get(a, a) for a in args]
    done = subprocess.run(
        [sys.executable, "-m", "xcep", *args], input=stdin, capture_output=True, check=False
    )
    assert done.returncode == code, done.stderr.decode()
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_example_runs(command, monkeypatch):
    """The examples each command's --help shows run, from the repository's root, and
    exit 0; every command shows some."""
    import contextlib
    import io
    import shlex

    from xcep.cli import EXAMPLES, main

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        main([command, "--help"])
    assert EXAMPLES[command]
    for example in EXAMPLES[command]:
        assert example in help_text.getvalue().replace("\n  ", "\n  ")
        argv = shlex.split(example)[1:]
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main(argv, io.StringIO()) == 0, (example, err.getvalue())


def test_the_page_lists_the_help_examples():
    from xcep.cli import EXAMPLES

    for lines in EXAMPLES.values():
        for line in lines:
            assert line in DOC, line


def test_every_option_of_every_command_has_help():
    """--help gives every option (and argument) a description, Spark's commands too."""

    def missing(parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from missing(sub, f"{prefix} {name}")
            elif not action.help:
                yield f"{prefix} {action.option_strings or action.dest}"

    assert list(missing(build_parser(), "xcep")) == []
