"""``radspatial agent`` (answers; ``agent train`` is the deprecated name of ``train unet``,
``cli/train``) and ``radspatial serve`` (the agent behind an OpenAI-compatible API); their
options are the job specs ``agent/job.AnswerJob`` and ``ServeJob``."""

from __future__ import annotations

import argparse
import sys

from radspatial.agent.job import AnswerJob, ServeJob, run_answer, run_serve
from radspatial.cli import train
from radspatial.cli.common import Command, HelpFormatter, run_job, spec_arguments


class AgentHelpFormatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """radspatial's help formatting, with the description's line breaks kept."""


def cmd_agent(args: argparse.Namespace) -> int:
    import json

    from radspatial.agent.pipeline.agent import verdict

    job, result = run_job(AnswerJob, args, run_answer)
    if job.json:
        print(json.dumps(result.trace, indent=2))
    else:
        print(f"answer: {verdict(result)} ({result.trace['decision']['reason']})")
    side = sys.stderr if job.json else sys.stdout
    if job.trace:
        print(f"trace: {job.trace}", file=side)
    if job.overlay:
        print(f"overlay: {job.overlay}", file=side)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    run_job(ServeJob, args, run_serve)
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
        spec_arguments(AnswerJob),
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
        arguments=spec_arguments(ServeJob),
        run=cmd_serve,
    ),
)
