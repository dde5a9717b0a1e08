"""Command line: one module per command group, each subcommand a thin call into one public
function. Bad input exits with status 2 and one line naming the file and the problem.

``radspatial.cli:main`` is the console entry point.
"""

from __future__ import annotations

import argparse
import sys

from radspatial.cli import agent, demo, eval, export, generate, lmms, phantom, probe, train
from radspatial.cli.common import add_commands
from radspatial.core.runtime import bundled_example  # re-exported: older imports and tests

__all__ = ["build_parser", "bundled_example", "main"]


def build_parser() -> argparse.ArgumentParser:
    from radspatial import __version__

    parser = argparse.ArgumentParser(
        prog="radspatial", description="Spatial-reasoning benchmarks, evaluation and agents for CT"
    )
    parser.add_argument("--version", action="version", version=f"radspatial {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (
        generate,
        eval,
        demo,
        agent,
        train,
        phantom,
        probe,
        export,
        lmms,
    ):  # help lists them so
        add_commands(sub, group.COMMANDS)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:  # `radspatial ... | head` closed stdout early: stop quietly
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the exit-time flush must not fail again
        return 141  # as if killed by SIGPIPE (128 + 13), what shells show for `cmd | head`


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)  # --help prints here
    args.argv = list(sys.argv[1:] if argv is None else argv)
    import warnings

    # pydicom warns (two raw lines, the file's bytes quoted) on every value that breaks its VR;
    # our readers check what they use and refuse in one line, so the warning is only noise
    warnings.filterwarnings("ignore", category=UserWarning, module="pydicom")
    from radspatial.core.redact import redact
    from radspatial.core.textsafe import log_text
    from radspatial.imaging.volumes import InputError

    try:
        return args.func(args)
    except (InputError, FileExistsError, ValueError) as exc:
        msg = log_text(" ".join(redact(str(exc)).split()))  # text from files: no ESC
        print(f"radspatial {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        raise  # stdout closed early: main() ends quietly
    except OSError as exc:  # a full or read-only disk, a missing or unreadable file
        from radspatial.core.errors import os_error_line

        msg = log_text(" ".join(redact(os_error_line(exc, getattr(args, "out", None))).split()))
        print(f"radspatial {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"radspatial {args.command}: interrupted", file=sys.stderr)
        return 143 if type(exc).__name__ == "Terminated" else 130
