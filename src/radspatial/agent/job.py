"""The ``agent`` and ``serve`` job specs: every option of ``radspatial agent`` / ``radspatial
serve`` and of ``radspatial.answer`` / ``radspatial.serve``, declared once (``core/jobspec``),
and :func:`run_answer` / :func:`run_serve`, which both faces call.

Light on purpose: the command line builds its parsers from this module, so nothing heavy (numpy,
PIL, torch) is imported at module level.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from radspatial.core import rules
from radspatial.core.jobspec import ParamError, option, positive

if TYPE_CHECKING:
    from radspatial.agent.pipeline.agent import AgentAnswer

LOCALIZER_HELP = (
    "auto: markers for marker references, the shipped organs model otherwise; or one of the "
    "localizers listed above"
)
SERVE_LOCALIZER_HELP = (
    "localizer to serve, repeatable (default: auto as 'agent', and markers; mask, an oracle "
    "needing the request's radspatial_mask label image, only when named)"
)


# fmt: off
@dataclass(frozen=True, kw_only=True)
class AnswerJob:
    """What one ``agent`` answer is asked: the image, the question, how to localize, what to
    write besides the answer."""

    image: Path | None = option(None, type=Path, positional=True, annotation="str | Path",
        help="the image, PNG/JPEG; required unless train (default: none)")
    question: str | None = option(None, positional=True, annotation="str",
        help="the spatial question; required unless train (default: none)")
    localizer: str = option("auto", help=LOCALIZER_HELP)
    model: Path | None = option(None, type=Path, annotation="str | Path | None",
        help="model folder: unet's, or organs' instead of the shipped one (default: shipped)")
    second_model: str | None = option(None,
        help="auto: a second organs model folder, asked where the first's localization is "
        "not trusted; 'shipped': the package's (radspatial/data/organs_wide: chest and "
        "pelvis), the default with the shipped first model; 'none': the first alone "
        "(default with --model)")
    mask: Path | None = option(None, type=Path, annotation="str | Path | None",
        help="label image in the shown frame, for the mask localizer (default: none)")
    labels: str | None = option(None,
        help="label table of --mask (default: totalsegmentator, grouped)")
    margin: float = option(rules.MARGIN_PX, type=float,
        help="px of a 512 px image, scaled to the image: abstain below this")
    json: bool = option(False, action="store_true", api=False,
        help="print the whole trace as JSON")
    trace: Path | None = option(None, type=Path, annotation="str | Path | None",
        help="write the trace JSON to this file (default: not written)")
    overlay: Path | None = option(None, type=Path, annotation="str | Path | None",
        help="write an overlay PNG here (default: not written)")
# fmt: on


def run_answer(job: AnswerJob) -> AgentAnswer:
    """The agent's answer to ``job.question`` about ``job.image`` (the trace and overlay
    written where asked); a refused input is a :class:`ParamError` or a one-line ValueError
    naming the file."""
    if job.image is None or job.question is None:
        raise ParamError(("image", "question"), "{image} and {question} are both needed")
    from radspatial.agent.overlay import draw_overlay
    from radspatial.agent.pipeline.agent import Agent, load_image
    from radspatial.agent.pipeline.types import Context
    from radspatial.core.io import atomic_write_bytes, atomic_write_json
    from radspatial.core.progress import heartbeat

    image_path = Path(job.image)
    if not image_path.is_file():
        raise ValueError(f"{image_path}: no such image")
    options: dict[str, Any] = {"model_dir": Path(job.model)} if job.model else {}
    if job.second_model is not None:
        if job.localizer != "auto":
            raise ParamError(("second_model", "localizer"), "{second_model} needs {localizer} auto")
        named = {"none": False, "shipped": True}
        options["second"] = named.get(job.second_model.lower(), Path(job.second_model))
    agent = Agent(job.localizer, margin=job.margin, **options)
    context = Context()
    if job.mask is not None:
        from radspatial.core.labels import load_table

        mask = _readable(job.mask, "mask", _mask_array)
        context = Context(mask=mask, labels=load_table(job.labels).names)
    image = _readable(image_path, "image", load_image)
    _check_mask_shape(job.mask, context, image)
    # a cold start (PyTorch, the organs network: docs/howto/serve_agent.md) takes a minute or
    # more on a busy machine: a line every few seconds says what it is doing
    with heartbeat("agent") as note:
        note("answering (the first answer on a plain slice loads PyTorch and the network)")
        result = agent.answer(image, job.question, context=context)
    if job.trace:
        atomic_write_json(Path(job.trace), result.trace)
    if job.overlay:
        import io

        buf = io.BytesIO()
        draw_overlay(image, result).save(buf, format="PNG")
        atomic_write_bytes(Path(job.overlay), buf.getvalue())
    return result


def _check_mask_shape(path, context, image) -> None:  # noqa: ANN001 - arrays, lazily imported
    """A mask must be a one-channel label image of the image's size."""
    if context.mask is not None and context.mask.shape != image.shape[:2]:
        channels = " x channels" if context.mask.ndim == 3 else ""
        raise ParamError(
            ("mask", "image"),
            f"{path}: {{mask}} is {'x'.join(map(str, context.mask.shape))} (rows x columns"
            f"{channels}), expected a one-channel label image the size of {{image}} "
            f"({image.shape[0]}x{image.shape[1]})",
        )


def _readable(path, what: str, read):  # noqa: ANN001, ANN202 - any reader
    """``read(path)``, its failure one line naming the file (truncated, not an image, bomb)."""
    try:
        return read(path)
    except (ValueError, OSError) as exc:
        raise ValueError(f"{path}: {what}: {exc}") from None


def _mask_array(path):  # noqa: ANN001, ANN202 - numpy, lazily imported
    """The label image as it is stored (8- or 16-bit ids), refused over the agent's pixel
    limit before it is decoded."""
    import numpy as np
    from PIL import Image

    from radspatial.agent.pipeline.agent import MAX_PIXELS

    try:
        with Image.open(path) as img:
            if img.width * img.height > MAX_PIXELS:
                raise ValueError(f"{img.width} x {img.height} px is over the limit")
            return np.asarray(img)
    except (Image.DecompressionBombError, SyntaxError) as exc:
        raise ValueError(f"not a readable image ({exc})") from None


# fmt: off
@dataclass(frozen=True, kw_only=True)
class ServeJob:
    """What ``serve`` is asked: where to listen, who may call, which agents, how many at once."""

    host: str = option("127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    port: int = option(8000, type=int, help="TCP port (0: any free port)")
    api_key_env: str | None = option(None, exclusive="key", metavar="NAME",
        help="require the bearer key in environment variable NAME (default: RADSPATIAL_API_KEY "
        "when set); unlike --api-key it does not show in ps")
    api_key: str | None = option(None, exclusive="key",
        help="require this bearer key (visible to other local users) (default: none)")
    localizers: tuple[str, ...] | None = option(None, flag="--localizer", action="append",
        metavar="LOCALIZER", annotation="Sequence[str] | None", help=SERVE_LOCALIZER_HELP)
    model: Path | None = option(None, type=Path, annotation="str | Path | None",
        help="model folder for the unet localizer (default: none)")
    threads: int = option(32, type=positive(int), help="agent calls answered at once")
    max_connections: int | None = option(None, type=positive(int),
        help="open connections (default: 4 x threads)")
    max_pixels: int | None = option(None, type=positive(int),
        help="pixels of one image (default: 4096^2)")
    max_total_pixels: int | None = option(None, type=positive(int),
        help="decoded pixels of all requests at once (default 2 x 4096^2, about 0.5 GB)")
# fmt: on


def serve_key(job: ServeJob) -> str | None:
    """The bearer key the server requires: ``api_key``, the variable ``api_key_env`` names (set
    and not empty, else refused), or ``RADSPATIAL_API_KEY`` when neither is given."""
    if job.api_key is not None and job.api_key_env is not None:
        raise ParamError(("api_key", "api_key_env"), "{api_key} and {api_key_env}: give one")
    if job.api_key_env is not None:
        key = os.environ.get(job.api_key_env)
        if not key:
            raise ParamError("api_key_env", f"{{param}} {job.api_key_env}: that variable is not "
                             "set or empty")  # fmt: skip
        return key
    return job.api_key if job.api_key is not None else os.environ.get("RADSPATIAL_API_KEY")


def run_serve(job: ServeJob) -> None:
    """Serves the agents ``job`` asks for until Ctrl-C (``agent/server/server.serve``); a port that
    cannot be bound is a :class:`ParamError` naming ``port``."""
    from radspatial.agent.server.server import serve

    api_key = serve_key(job)
    keywords: dict[str, Any] = {
        "max_connections": job.max_connections, "max_pixels": job.max_pixels,
        "max_total_pixels": job.max_total_pixels,
    }  # fmt: skip
    try:
        serve(
            host=job.host, port=job.port, api_key=api_key,
            localizers=list(job.localizers) if job.localizers else None,
            model_dir=job.model, threads=job.threads, **keywords,
        )  # fmt: skip
    except OSError as exc:  # e.g. the port is taken
        why = exc.strerror or exc
        raise ParamError("port", f"{{param}} {job.port}: cannot serve on {job.host}:{job.port}: "
                         f"{why}") from None  # fmt: skip
