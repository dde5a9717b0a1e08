"""Argument types and option groups shared by several subcommands."""

from __future__ import annotations

import argparse


def csv_lower(text: str) -> tuple[str, ...]:
    """Comma list of names, lower-cased (setups, markers, question types)."""
    return tuple(t.strip().lower() for t in text.split(",") if t.strip())


def csv_list(text: str) -> tuple[str, ...]:
    """Comma list kept as written (variants, probe task names)."""
    return tuple(t.strip() for t in text.split(",") if t.strip())


def window(text: str) -> tuple[float, float]:
    try:
        w, level = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--window wants W,L (e.g. 400,40), got {text!r}"
        ) from None
    return (w, level)


def triple(kind: type):
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


def positive(kind: type):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value

    return parse


def add_executor_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local process pool, or Ray (pip install 'radspatial[ray]'): same output bytes",
    )
    p.add_argument(
        "--ray-address",
        help="Ray cluster to join (default: env RAY_ADDRESS, else a local Ray with --workers CPUs)",
    )
