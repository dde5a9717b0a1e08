"""One job spec per command, two faces: a frozen dataclass whose fields carry their flag, help and
default (:func:`option`), from which both the command's argparse options (:func:`add_arguments`)
and the Python API's keyword signature (:func:`api_function`) are built, so the two cannot drift
apart (tests/test_jobspec.py checks them flag for keyword).

Example:
    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True, kw_only=True)
    ... class Job:
    ...     size: int = option(512, type=int, help="image size in px")
    >>> signature(Job)
    <Signature (*, size: 'int' = 512)>

A value the job refuses raises :class:`ParamError` naming the parameter; the face the caller
used words it: ``--size must be ...`` on the command line, ``size= must be ...`` in Python.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

MISSING = dataclasses.MISSING


def option(
    default: Any = MISSING,
    *,
    help: str | Callable[[], str],  # noqa: A002 - argparse's own name
    flag: str | None = None,
    cli: bool = True,
    api: bool = True,
    positional: bool = False,
    argument: bool = False,
    exclusive: str | None = None,
    csv: bool = False,
    annotation: str | None = None,
    **argparse_keywords: Any,
) -> Any:
    """A job spec field. ``flag``: its command-line option (default ``--<name-with-dashes>``);
    ``help``: text, or a function giving it when help is printed (a registry's names);
    ``cli``/``api``: which faces have it (a field on one face only is declared here, and the
    parity test lists them); ``positional``: the API takes it by position too; ``argument``:
    on the command line a positional argument (``report RUN [RUN ...]``), not a flag;
    ``exclusive``: options sharing this name are mutually exclusive; ``csv``: the API's list
    is read as the flag's comma list; ``annotation``: the API's type where it differs from the
    field's. ``argparse_keywords`` (type, choices, action, metavar, nargs, const) go to
    ``add_argument``; ``type`` also reads an API string as the command line would."""
    meta = dict(
        help=help, flag=flag, cli=cli, api=api, positional=positional, argument=argument,
        exclusive=exclusive,
        csv=csv, annotation=annotation, argparse=argparse_keywords,
    )  # fmt: skip
    return dataclasses.field(default=default, metadata={"jobspec": meta})


def _meta(f: dataclasses.Field) -> dict[str, Any]:
    return f.metadata["jobspec"]


def fields(spec: type, face: str = "cli") -> list[dataclasses.Field]:
    """The spec's fields present on ``face`` ("cli" or "api"), in declaration order."""
    return [f for f in dataclasses.fields(spec) if _meta(f)[face]]


def flag_of(f: dataclasses.Field) -> str:
    """How the command line names field ``f``: its flag, or a positional argument's name."""
    if _meta(f)["argument"]:
        return f.name.upper()
    return _meta(f)["flag"] or "--" + f.name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser, spec: type) -> None:
    """One ``add_argument`` per command-line field of ``spec``, in declaration order (the help
    lists them so); fields with the same ``exclusive`` name share a mutually exclusive group."""
    groups: dict[str, Any] = {}
    for f in fields(spec, "cli"):
        meta = _meta(f)
        text = meta["help"]() if callable(meta["help"]) else meta["help"]
        keywords: dict[str, Any] = {"dest": f.name, "help": text, **meta["argparse"]}
        if f.default is MISSING:
            keywords["required"] = True
        elif f.default is not None and keywords.get("action") != "store_true":
            keywords["default"] = f.default
        target: Any = parser
        if meta["exclusive"]:
            if meta["exclusive"] not in groups:
                groups[meta["exclusive"]] = parser.add_mutually_exclusive_group()
            target = groups[meta["exclusive"]]
        if meta["argument"]:  # argparse names a positional by its dest, never required=
            keywords.pop("required", None)
            target.add_argument(keywords.pop("dest"), **keywords)
        else:
            target.add_argument(flag_of(f), **keywords)


def from_namespace(spec: type, args: argparse.Namespace, **overrides: Any) -> Any:
    """The job the parsed flags ask for (API-only fields keep their defaults)."""
    values = {f.name: getattr(args, f.name) for f in fields(spec, "cli")}
    with caller_terms(spec, "cli"):
        return spec(**{**values, **overrides})


def _read(f: dataclasses.Field, value: Any) -> Any:
    """An API value read as the command line reads the flag: a string through the flag's
    ``type``; a list or tuple of a comma-list flag (``csv``) joined first, so ``(350, 50)`` is
    ``"350,50"``; other lists as tuples."""
    meta = _meta(f)
    kind = meta["argparse"].get("type")
    if meta["csv"] and isinstance(value, list | tuple):
        value = ",".join(str(v) for v in value)
    if isinstance(value, str) and kind is not None and kind is not str:
        try:
            return kind(value)
        except (argparse.ArgumentTypeError, ValueError, TypeError) as exc:
            raise ParamError(f.name, f"{{param}} {exc}") from None
    return tuple(value) if isinstance(value, list) else value


def from_keywords(spec: type, keywords: Mapping[str, Any]) -> Any:
    """The job the API keywords ask for, each value read as its flag would be."""
    by_name = {f.name: f for f in fields(spec, "api")}
    with caller_terms(spec, "api"):
        values = {k: _read(by_name[k], v) for k, v in keywords.items()}
        return spec(**values)


class ParamError(ValueError):
    """A job parameter's value is refused. ``param``: the field (or fields) the refusal is
    about; ``template`` says why, with ``{param}`` where the first is named and ``{<field>}``
    where any of them is; ``str()`` words it as the command line does (``--size``)."""

    def __init__(self, param: str | tuple[str, ...], template: str) -> None:
        self.params = (param,) if isinstance(param, str) else tuple(param)
        self.param, self.template = self.params[0], template
        super().__init__(self.worded(lambda p: "--" + p.replace("_", "-")))

    def worded(self, name: str | Callable[[str], str]) -> str:
        """The message with each parameter named by ``name(field)`` (a string: the first's)."""
        namer = name if callable(name) else (lambda _: name)
        text = self.template
        for p in self.params:
            text = text.replace("{" + p + "}", namer(p))
        return text.replace("{param}", namer(self.param))


@contextmanager
def caller_terms(spec: type, face: str) -> Iterator[None]:
    """A :class:`ParamError` raised inside, re-worded in the caller's terms: the field's flag on
    the command line, ``name=`` in Python."""
    try:
        yield
    except ParamError as exc:
        known = {f.name: f for f in dataclasses.fields(spec)}
        if any(p not in known for p in exc.params):
            raise
        raise ValueError(exc.worded(lambda p: term(known[p], face))) from None


def term(f: dataclasses.Field, face: str) -> str:
    """How a caller names field ``f``: its flag (``--seg-dir``) on "cli", ``seg_dir=`` on "api"."""
    return flag_of(f) if face == "cli" else f"{f.name}="


def signature(spec: type, returns: Any = inspect.Signature.empty) -> inspect.Signature:
    """The API's signature: positional fields first (in order), then the rest keyword-only."""
    api = fields(spec, "api")
    ordered = [f for f in api if _meta(f)["positional"]] + [
        f for f in api if not _meta(f)["positional"]
    ]
    params = []
    for f in ordered:
        kind = (
            inspect.Parameter.POSITIONAL_OR_KEYWORD
            if _meta(f)["positional"]
            else inspect.Parameter.KEYWORD_ONLY
        )
        default = inspect.Parameter.empty if f.default is MISSING else f.default
        note = _meta(f)["annotation"] or f.type
        params.append(inspect.Parameter(f.name, kind, default=default, annotation=note))
    return inspect.Signature(params, return_annotation=returns)


def api_function(spec: type) -> Callable[[Callable[[Any], Any]], Callable[..., Any]]:
    """Decorates ``run(job) -> result`` into the API call that takes the spec's fields as
    arguments (its ``inspect.signature`` is built from the spec) and runs the job they make."""

    def wrap(run: Callable[[Any], Any]) -> Callable[..., Any]:
        sig = signature(spec, run.__annotations__.get("return", inspect.Signature.empty))

        @functools.wraps(run)
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                bound = sig.bind(*args, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{run.__name__}(): {exc}") from None
            return run(from_keywords(spec, bound.arguments))

        call.__signature__ = sig  # type: ignore[attr-defined]
        del call.__wrapped__  # help() and inspect show the spec's keywords, not ``job``
        return call

    return wrap


def positive(kind: type) -> Callable[[str], Any]:
    """A number of ``kind`` above 0 (threads, connections, pixels)."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value

    return parse


def csv_lower(text: str) -> tuple[str, ...]:
    """Comma list of names, lower-cased (setups, markers, question types)."""
    return tuple(t.strip().lower() for t in text.split(",") if t.strip())


def csv_list(text: str) -> tuple[str, ...]:
    """Comma list kept as written (variants, probe task names)."""
    return tuple(t.strip() for t in text.split(",") if t.strip())


def window(text: str) -> tuple[float, float]:
    """``W,L``: a display window's width and level."""
    try:
        w, level = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"wants W,L (e.g. 400,40), got {text!r}") from None
    return (w, level)


def triple(kind: type) -> Callable[[str], tuple]:
    """``X,Y,Z``: three comma-separated values of ``kind`` (a volume's shape in voxels)."""

    def parse(text: str) -> tuple:
        error = argparse.ArgumentTypeError(f"expected three comma-separated values, got {text!r}")
        try:
            values = tuple(kind(v) for v in text.split(","))
        except ValueError:
            raise error from None
        if len(values) != 3:
            raise error
        return values

    return parse


def spacing(text: str) -> tuple[float, float, float]:
    """Voxel spacing sx,sy,sz in mm: three finite numbers above 0."""
    import math

    values = triple(float)(text)
    if not all(math.isfinite(v) and 0 < v <= 1000 for v in values):
        raise argparse.ArgumentTypeError(f"expected three finite mm values > 0, got {text!r}")
    return values


def fractions(text: str) -> tuple[float, float, float]:
    """Three split fractions (train,val,test), each 0-1, summing to 1."""
    import math

    values = triple(float)(text)
    if not all(math.isfinite(v) and 0 <= v <= 1 for v in values) or abs(sum(values) - 1) > 1e-6:
        raise argparse.ArgumentTypeError(
            f"expected three fractions 0-1 that sum to 1 (e.g. 0.7,0.15,0.15), got {text!r}"
        )
    return values
