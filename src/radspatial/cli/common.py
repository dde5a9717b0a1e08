"""What several subcommands share: the :class:`Command` record each command group declares
its subcommands with (registered by :func:`add_commands`), the help formatting and the
argument types (from ``core/jobspec``, where the commands' job specs declare their options)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from radspatial.bench.job import question_types
from radspatial.core.jobspec import (
    add_arguments,
    caller_terms,
    csv_list,
    csv_lower,
    fractions,
    from_namespace,
    positive,
    spacing,
    triple,
    window,
)

__all__ = [
    "csv_list",
    "csv_lower",
    "fractions",
    "positive",
    "question_types",
    "spacing",
    "triple",
    "window",
]  # argument types, also here


class HelpFormatter(argparse.HelpFormatter):
    """Shows every option's default after its help, as argparse's ArgumentDefaultsHelpFormatter
    does, but leaves out "no value" defaults (None, False, ()) and writes tuples as comma lists."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "(default" in text
            or default is None
            or default is False
            or default == ()
            or default is argparse.SUPPRESS
            or not action.option_strings
        ):
            return text
        if isinstance(default, tuple | list):
            default = ",".join(str(v) for v in default)
        return f"{text} (default: {str(default).replace('%', '%%')})"


class LocalizerHelpParser(argparse.ArgumentParser):
    """A parser whose description's ``{localizers}`` is filled from the agent's localizer
    registry when help is printed (the registry imports numpy; --help elsewhere stays fast)."""

    def format_help(self) -> str:
        if self.description and "{localizers}" in self.description:
            from radspatial.agent.pipeline.types import list_localizers

            self.description = self.description.replace(
                "{localizers}", ", ".join(list_localizers())
            )
        return super().format_help()


class LazyArgumentsParser(argparse.ArgumentParser):
    """A parser that declares its arguments only when it parses (``populate``): a trainer's
    defaults come from a module that imports numpy and torch, so building the whole parser for
    ``radspatial --help`` must not read them."""

    populate: Callable[[argparse.ArgumentParser], None] | None = None

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 - argparse's
        populate, self.populate = self.populate, None
        try:
            if populate is not None:
                populate(self)
        except ImportError as exc:  # e.g. torch, for a trainer: one line, not a traceback
            self.error(f"needs {exc.name or exc}: pip install 'radspatial[agent]'")
        return super().parse_known_args(args, namespace)


@dataclass(frozen=True)
class Command:
    """One (sub)command as data: its name, one-line help and description, the function that
    declares its arguments and the one that runs it, or, for a group, its subcommands (parsed
    into ``dest``); with both ``run`` and subcommands, the subcommand is optional (``agent``
    answers, ``agent train`` trains, each with its own ``--help``). ``localizers``: the
    description names the localizers (see :class:`LocalizerHelpParser`); ``lazy``: the
    arguments are declared only when this command is parsed (:class:`LazyArgumentsParser`)."""

    name: str
    help: str
    description: str | None = None
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    run: Callable[[argparse.Namespace], int] | None = None
    subcommands: tuple[Command, ...] = ()
    dest: str | None = None
    metavar: str | None = None
    formatter_class: type[argparse.HelpFormatter] = HelpFormatter
    localizers: bool = False
    lazy: bool = False

    def __post_init__(self) -> None:
        if self.run is None and not self.subcommands:
            raise ValueError(f"command {self.name!r}: give run or subcommands (or both)")


def add_commands(sub: argparse._SubParsersAction, commands: Iterable[Command]) -> None:
    """Each command's parser, in order, with its arguments, handler and subcommands."""
    for command in commands:
        p = sub.add_parser(
            command.name,
            help=command.help,
            description=command.description,
            formatter_class=command.formatter_class,
        )
        if command.localizers:
            p.__class__ = LocalizerHelpParser  # only format_help differs
        if command.lazy:
            p.__class__ = LazyArgumentsParser  # only parse_known_args differs
            p.populate = command.arguments  # type: ignore[attr-defined]
        elif command.arguments is not None:
            command.arguments(p)
        if command.run is not None:
            p.set_defaults(func=command.run)  # a subcommand given sets its own
        if command.subcommands:
            optional = command.run is not None
            names = ", ".join(c.name for c in command.subcommands)
            group = p.add_subparsers(
                dest=command.dest,
                required=not optional,
                metavar=command.metavar,
                help=f"{names}: each has its own --help" + " (optional)" * optional,
            )
            add_commands(group, command.subcommands)


J = TypeVar("J")
R = TypeVar("R")


def spec_arguments(spec: type) -> Callable[[argparse.ArgumentParser], None]:
    """A command's ``arguments``: declares job spec ``spec``'s command-line options."""
    return partial(add_arguments, spec=spec)


def job_command(
    name: str, help: str, spec: type, run: Callable[[argparse.Namespace], int]
) -> Command:
    """A command whose options are job spec ``spec``'s, run by ``run``."""
    return Command(name, help, arguments=spec_arguments(spec), run=run)


def run_job(
    spec: type[J], args: argparse.Namespace, run: Callable[..., R], **run_kwargs: Any
) -> tuple[J, R]:
    """The job that the parsed flags ask for (``from_namespace``) and what ``run(job,
    **run_kwargs)`` returns, a refused value named by its flag (``caller_terms``)."""
    job = from_namespace(spec, args)
    with caller_terms(spec, "cli"):
        return job, run(job, **run_kwargs)
