"""``radspatial train unet|organs|atlas`` (issue 35): each trainer a subcommand with its own
help; ``agent train`` still trains the unet and says it is deprecated; building the parser
reads no trainer module (they import torch)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from radspatial.cli import main


@pytest.mark.parametrize(
    ("trainer", "flags"),
    [
        ("unet", ["--data", "--epochs", "--size", "--threads"]),
        ("organs", ["--real-weight", "--n-phantoms", "--steps", "--init-from", "--synth"]),
        ("atlas", ["--volumes", "--step-mm", "--exclude"]),
    ],
)
def test_each_trainer_has_its_own_help(capsys, trainer, flags):
    with pytest.raises(SystemExit) as done:
        main(["train", trainer, "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0 and f"usage: radspatial train {trainer}" in out
    assert all(flag in out for flag in ["--out", *flags]), out


def test_train_lists_its_trainers(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in ("unet", "organs", "atlas"))
    with pytest.raises(SystemExit) as done:  # a trainer is required
        main(["train"])
    assert done.value.code == 2 and "TRAINER" in capsys.readouterr().err


def _refused(tmp_path, *command: str) -> subprocess.CompletedProcess:
    """``--out`` inside ``--data``: refused before torch loads (a quick, real run)."""
    (tmp_path / "ds").mkdir()
    argv = [*command, "--data", str(tmp_path / "ds"), "--out", str(tmp_path / "ds" / "m")]
    code = "import sys; from radspatial.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)


def test_train_unet_refuses_before_training(tmp_path):
    res = _refused(tmp_path, "train", "unet")
    assert res.returncode == 2 and "deprecated" not in res.stderr
    assert res.stderr.startswith("radspatial train: error:"), res.stderr


def test_agent_train_still_works_and_says_use_train_unet(tmp_path):
    res = _refused(tmp_path, "agent", "train")
    lines = res.stderr.splitlines()
    assert res.returncode == 2 and len(lines) == 2, res.stderr
    assert (
        lines[0] == "radspatial agent train is deprecated: use radspatial train unet (same options)"
    )
    assert lines[1].startswith("radspatial agent: error:")


def test_building_the_parser_reads_no_trainer():
    code = (
        "import sys; from radspatial.cli import build_parser; build_parser().format_help()\n"
        "trainers = {'torch', 'radspatial.training.organs_train', "
        "'radspatial.training.organs_atlas'}\n"
        "print(sorted(trainers & set(sys.modules)))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "[]"
