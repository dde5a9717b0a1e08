"""``docs/cli.md``: every command's ``--help`` options, written from the argparse parsers
themselves, so the reference cannot drift from the command line (a test compares the file with
:func:`cli_reference`). Regenerate it with::

    python -m radspatial.cli.reference > docs/cli.md
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

HEAD = (
    "# Command-line reference\n\n"
    "Every command and every option its `--help` lists, generated from the parsers "
    "(`python -m radspatial.cli.reference > docs/cli.md`; `tests/test_docs_blocks.py` checks "
    "that this file is what they give). The README keeps the tour; this is the list.\n"
)


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], str | None, argparse.ArgumentParser]]:
    """(command path, one-line help, parser) of every (sub)command under ``parser``, in order."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help for a in action._choices_actions}
        for name, sub in action.choices.items():
            populate = getattr(sub, "populate", None)
            if populate is not None:  # a lazy parser (a trainer's): its options, declared now
                sub.populate = None
                populate(sub)
            yield (*path, name), helps.get(name), sub
            yield from _commands(sub, (*path, name))


def _description(sub: argparse.ArgumentParser) -> str:
    text = sub.description or ""
    if "{localizers}" in text:
        from radspatial.agent.pipeline.types import list_localizers

        text = text.replace("{localizers}", ", ".join(list_localizers()))
    return " ".join(text.split())


def _options(sub: argparse.ArgumentParser) -> list[str]:
    formatter = sub.formatter_class(prog=sub.prog)
    lines = []
    for action in sub._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        if isinstance(action, argparse._HelpAction):
            continue
        flags = formatter._format_action_invocation(action)
        text = " ".join(formatter._expand_help(action).split()) if action.help else ""
        lines.append(f"- `{flags}`" + (f": {text}" if text else ""))
    return lines


def cli_reference() -> str:
    """The markdown of ``docs/cli.md``."""
    from radspatial.cli import build_parser

    parts = [HEAD]
    for path, help_line, sub in _commands(build_parser(), ("radspatial",)):
        parts.append(f"\n## {' '.join(path)}\n")
        for text in (help_line, _description(sub)):
            if text:
                parts.append(f"\n{' '.join(text.split())}\n")
        options = _options(sub)
        if options:
            parts.append("\n" + "\n".join(options) + "\n")
    return "".join(parts)


if __name__ == "__main__":
    print(cli_reference(), end="")
