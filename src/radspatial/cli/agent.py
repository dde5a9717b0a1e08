"""``radspatial agent`` (answers; ``agent train`` is the deprecated name of ``train unet``,
``cli/train``) and ``radspatial serve`` (the agent behind an OpenAI-compatible API)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from radspatial.cli import train
from radspatial.cli.common import Command, HelpFormatter, pass_on, positive
from radspatial.core import rules


class AgentHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """radspatial's help formatting, with the description's line breaks kept."""


def _agent_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--image", type=Path, help="the image, PNG/JPEG; required unless train (default: none)"
    )
    p.add_argument("--question", help="the spatial question; required unless train (default: none)")
    p.add_argument(
        "--localizer",
        default="auto",
        help="auto: markers for marker references, the shipped organs model otherwise; or "
        "one of the localizers listed above",
    )
    p.add_argument(
        "--model",
        type=Path,
        help="model folder: unet's, or organs' instead of the shipped one (default: shipped)",
    )
    p.add_argument(
        "--mask",
        type=Path,
        help="label image in the shown frame, for the mask localizer (default: none)",
    )
    p.add_argument("--labels", help="label table of --mask (default: totalsegmentator, grouped)")
    p.add_argument("--margin", type=float, default=rules.MARGIN_PX, help="px: abstain below this")
    p.add_argument("--json", action="store_true", help="print the whole trace as JSON")
    p.add_argument(
        "--trace", type=Path, help="write the trace JSON to this file (default: not written)"
    )
    p.add_argument("--overlay", type=Path, help="write an overlay PNG here (default: not written)")


def cmd_agent(args: argparse.Namespace) -> int:
    if args.image is None or args.question is None:
        raise ValueError("radspatial agent needs --image and --question")
    import json

    from radspatial.agent.core import Agent, draw_overlay, load_image, verdict
    from radspatial.agent.types import Context
    from radspatial.core.io import atomic_write_bytes, atomic_write_json

    if not args.image.is_file():
        raise ValueError(f"{args.image}: no such image")
    options = {"model_dir": args.model} if args.model else {}
    agent = Agent(args.localizer, margin=args.margin, **options)
    context = Context()
    if args.mask is not None:
        from radspatial.core.labels import load_table

        mask = _readable(args.mask, "mask", _mask_array)
        context = Context(mask=mask, labels=load_table(args.labels).names)
    image = _readable(args.image, "image", load_image)
    _check_mask_shape(args.mask, context, image)
    from radspatial.core.progress import heartbeat

    # a cold start (PyTorch, the organs network: docs/server.md) takes a minute or
    # more on a busy machine: a line every few seconds says what it is doing
    with heartbeat("agent") as note:
        note("answering (the first answer on a plain slice loads PyTorch and the network)")
        result = agent.answer(image, args.question, context=context)
    if args.json:
        print(json.dumps(result.trace, indent=2))
    else:
        print(f"answer: {verdict(result)} ({result.trace['decision']['reason']})")
    if args.trace:
        atomic_write_json(args.trace, result.trace)
        print(f"trace: {args.trace}", file=sys.stderr if args.json else sys.stdout)
    if args.overlay:
        import io

        buf = io.BytesIO()
        draw_overlay(image, result).save(buf, format="PNG")
        atomic_write_bytes(args.overlay, buf.getvalue())
        print(f"overlay: {args.overlay}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _check_mask_shape(path, context, image) -> None:
    """A ``--mask`` must be a one-channel label image of the ``--image``'s size."""
    if context.mask is not None and context.mask.shape != image.shape[:2]:
        raise ValueError(
            f"{path}: --mask is {'x'.join(map(str, context.mask.shape))} (rows x columns"
            f"{' x channels' if context.mask.ndim == 3 else ''}), expected a one-channel label "
            f"image of the --image's {image.shape[0]}x{image.shape[1]}"
        )


def _readable(path, what: str, read):
    """``read(path)``, its failure one line naming the file (truncated, not an image, bomb)."""
    try:
        return read(path)
    except (ValueError, OSError) as exc:
        raise ValueError(f"{path}: {what}: {exc}") from None


def _mask_array(path):
    """The label image as it is stored (8- or 16-bit ids), refused over the agent's pixel
    limit before it is decoded."""
    import numpy as np
    from PIL import Image

    from radspatial.agent.core import MAX_PIXELS

    try:
        with Image.open(path) as img:
            if img.width * img.height > MAX_PIXELS:
                raise ValueError(f"{img.width} x {img.height} px is over the limit")
            return np.asarray(img)
    except (Image.DecompressionBombError, SyntaxError) as exc:
        raise ValueError(f"not a readable image ({exc})") from None


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)"
    )
    p.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port)")
    key = p.add_mutually_exclusive_group()
    key.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="require the bearer key in environment variable NAME (default: RADSPATIAL_API_KEY "
        "when set); unlike --api-key it does not show in ps",
    )
    key.add_argument(
        "--api-key", help="require this bearer key (visible to other local users) (default: none)"
    )
    p.add_argument(
        "--localizer", action="append", help="localizer to serve, repeatable (default: auto as "
        "'agent', and markers; mask, an oracle needing the request's radspatial_mask label "
        "image, only when named)",
    )  # fmt: skip
    p.add_argument("--model", type=Path, help="model folder for the unet localizer (default: none)")
    p.add_argument("--threads", type=positive(int), default=32, help="agent calls answered at once")
    p.add_argument(
        "--max-connections", type=positive(int), help="open connections (default: 4 x threads)"
    )
    p.add_argument("--max-pixels", type=positive(int), help="pixels of one image (default: 4096^2)")
    p.add_argument(
        "--max-total-pixels",
        type=positive(int),
        help="decoded pixels of all requests at once (default 2 x 4096^2, about 0.5 GB)",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from radspatial.agent.server import serve

    api_key = args.api_key
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise ValueError(f"--api-key-env {args.api_key_env}: that variable is not set or empty")
    elif api_key is None:
        api_key = os.environ.get("RADSPATIAL_API_KEY")
    try:
        serve(
            **pass_on(args, "host", "port"),
            api_key=api_key,
            localizers=args.localizer,
            model_dir=args.model,
            **pass_on(args, "threads", "max_connections", "max_pixels", "max_total_pixels"),
        )
    except OSError as exc:  # e.g. the port is taken
        why = exc.strerror or exc
        raise ValueError(f"cannot serve on {args.host}:{args.port}: {why}") from None
    return 0


COMMANDS = (
    Command(
        "agent",
        "answer a question about an image with the modular agent",
        "radspatial agent --image PNG --question TEXT [--localizer NAME] ...\n"
        "  prints the answer and the agent's reason; --json prints the whole trace instead,\n"
        "  --trace FILE writes it to a file.\n"
        "Training a localizer: radspatial train unet|organs|atlas (agent train: the old name\n"
        "  of train unet, deprecated).\n\n"
        "Localizers: {localizers}.",
        _agent_arguments,
        cmd_agent,
        subcommands=(
            Command(
                "train",
                "deprecated: use radspatial train unet (same options)",
                train.UNET_DESCRIPTION,
                train.unet_arguments,
                train.cmd_agent_train,
            ),
        ),
        dest="action",
        formatter_class=AgentHelpFormatter,
        localizers=True,
    ),
    Command(
        "serve",
        "serve the agent as an OpenAI-compatible API",
        arguments=_serve_arguments,
        run=cmd_serve,
    ),
)
