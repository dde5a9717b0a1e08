"""Eval conventions (issue 15): several --model values in one command, --model-args, a seeded
--limit sample spread over setups/markers/question types, complete --help. Real runs on a small
dataset of the bundled CT and a real HTTP server on localhost."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import pytest
from fake_server import FakeChatServer
from PIL import Image

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import build_parser, bundled_example, main
from radspatial.cli.eval_options import backend_options, parse_model_args, run_dir_for
from radspatial.core.io import read_jsonl
from radspatial.eval.items import load_items, sample_items
from radspatial.imaging.volumes import Case
from radspatial.questions import QuestionRules


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("evalcli") / "ds"
    ct, seg = bundled_example()
    # strict rules: at 96 px MIRP's 50 px along the axis leaves too few RQ items to spread over
    config = GenerateConfig(
        size=96,
        as_count=4,
        question_types=("relative_position", "size"),
        rules=QuestionRules(profile="strict"),
    )
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


def _ns(model: str, model_args: str | None = None, **flags) -> argparse.Namespace:
    base = dict(
        timeout=None, retries=None, api_key_env=None, hf_allow_download=False,
        hf_trust_remote_code=False,
    )  # fmt: skip
    return argparse.Namespace(model=model, model_args=model_args, **{**base, **flags})


def test_model_args_parse_and_map_onto_backend_options():
    assert parse_model_args("batch_size=4, device=cuda:1,dtype=float16,x=0.5,y=true") == {
        "batch_size": 4,
        "device": "cuda:1",
        "dtype": "float16",
        "x": 0.5,
        "y": True,
    }
    assert parse_model_args(None) == {} and parse_model_args("") == {}
    for bad, why in (("batch_size", "key=value"), ("=3", "key=value"), ("a=1,a=2", "twice")):
        with pytest.raises(ValueError, match=why):
            parse_model_args(bad)
    hf = backend_options(_ns("hf:/m", "batch_size=2,max_pixels=50176,dtype=float16"))
    assert hf == {"batch_size": 2, "max_pixels": 50176, "dtype": "float16"}
    hf = backend_options(_ns("hf:/m", "device=cpu", hf_allow_download=True))
    assert hf == {"device": "cpu", "allow_download": True}
    http = backend_options(_ns("openai-compat:m@http://x/v1", "timeout=7,retries=0"))
    assert http == {"timeout_s": 7.0, "max_attempts": 1}
    assert backend_options(_ns("openai:gpt", None, timeout=3.0)) == {"timeout_s": 3.0}
    vllm = backend_options(_ns("vllm:/m", "tensor_parallel_size=2,max_model_len=4096"))
    assert vllm == {"tensor_parallel_size": 2, "max_model_len": 4096}
    cases = (
        (_ns("hf:/m", "timeout=3"), "timeout is not an option here"),
        (_ns("baseline:yes", "batch_size=2"), "batch_size is not an option here"),
        (_ns("openai:gpt", "batch_size=2"), "known: timeout"),
        (_ns("hf:/m", "batch_size=0"), "batch_size must be an integer >= 1"),
        (_ns("hf:/m", "batch_size=two"), "must be a number"),
        (_ns("openai:gpt", "timeout=0"), "--timeout must be"),
        (_ns("openai:gpt", "retries=-1"), "--retries must be"),
        (_ns("openai:gpt", "timeout=5", timeout=6.0), "disagree"),
        (_ns("baseline:yes", None, timeout=5.0), "--timeout applies to openai"),
    )
    for ns, why in cases:
        with pytest.raises(ValueError, match=why):
            backend_options(ns)


def test_max_pixels_downscales_keeping_the_aspect():
    from radspatial.models.hf import _fit

    wide = Image.new("RGB", (400, 100))
    small = _fit(wide, 10_000)
    assert small.size == (200, 50)  # 4:1 kept, 10,000 px
    assert _fit(wide, 40_000) is wide and _fit(wide, None) is wide


def test_limit_samples_across_setups_markers_and_types(data):
    items = load_items(data)
    groups = {(i.setup, i.marker, i.question_type) for i in items}
    n = len(groups)
    first = sample_items(items, n, seed=0)
    assert {(i.setup, i.marker, i.question_type) for i in first} == groups  # one of each
    assert sample_items(items, n, seed=0) == first  # seeded
    assert {i.id for i in first} <= {i.id for i in sample_items(items, n + 5, seed=0)}
    assert {i.id for i in sample_items(items, n, seed=1)} != {i.id for i in first}
    assert [i.id for i in first] == sorted(i.id for i in first)  # dataset order kept
    double = sample_items(items, 2 * n, seed=3)
    per_group = Counter((i.setup, i.marker, i.question_type) for i in double)
    assert set(per_group.values()) == {2}
    for key in groups:  # two per group: one yes, one no
        assert {i.expected for i in double if (i.setup, i.marker, i.question_type) == key} == {
            0,
            1,
        }
    assert sample_items(items, 10**6) == items
    # the old behaviour, first N sorted ids, would have taken AS items only
    assert {i.setup for i in items[:n]} == {"as"}


def test_several_models_one_command_one_report(data, tmp_path, capsys):
    out = tmp_path / "runs"
    argv = ["eval", "--data", str(data), "--model", "baseline:yes", "baseline:no"]
    code = main([*argv, "--model", "baseline:anatomy-prior", "--out", str(out), "--runs", "1"])
    assert code == 0
    printed = capsys.readouterr().out
    specs = ("baseline:yes", "baseline:no", "baseline:anatomy-prior")
    for spec in specs:
        run = run_dir_for(out, spec)
        assert json.loads((run / "run.json").read_text())["model"] == spec
        assert f"{spec}: accuracy" in printed
    assert run_dir_for(out, "baseline:yes").name == "baseline_yes"
    report = out / "report"
    assert (report / "index.html").is_file() and (report / "summary.md").is_file()
    md = (report / "summary.md").read_text()
    assert all(f"| {spec} |" in md for spec in specs)
    assert f"report: {report / 'index.html'}" in printed
    # the same spec twice is refused before anything runs
    assert main([*argv, "--model", "baseline:yes", "--out", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "x").exists()


def test_limit_and_model_args_in_a_real_eval(data, tmp_path):
    out = tmp_path / "run"
    with FakeChatServer() as server:
        model = f"openai-compat:m@{server.base_url}"
        argv = ["eval", "--data", str(data), "--model", model, "--out", str(out)]
        argv += ["--runs", "1", "--limit", "9", "--model-args", "timeout=7,retries=2"]
        assert main(argv) == 0
        assert server.calls == 9
    run = json.loads((out / "run.json").read_text())
    assert run["backend"]["timeout_s"] == 7.0
    assert run["backend"]["retries"]["max_attempts"] == 3
    assert (run["limit"], run["limit_seed"], run["n_items"]) == (9, 0, 9)
    rows = list(read_jsonl(out / "results.jsonl"))
    assert len({r["setup"] for r in rows}) == 4  # spread, not the first 9 (all AS) items
    assert all(r["prompt"] and Path(r["image"]).is_file() for r in rows)


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


OWN_COMMANDS = (
    ("generate",),
    ("demo",),
    ("agent",),
    ("phantom",),
    ("counterfactual", "mirror"),
    ("eval",),
    ("report",),
    ("export", "mirp"),
    ("export", "hf"),
    ("probe", "build"),
    ("probe", "train"),
    ("probe", "eval"),
    ("probe", "table"),
)


@pytest.mark.parametrize("path", OWN_COMMANDS, ids=["-".join(p) for p in OWN_COMMANDS])
def test_help_gives_every_option_a_text_and_its_default(path):
    parser = _subparser(build_parser(), *path)
    text = " ".join(parser.format_help().split())
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, (path, action.dest)
        if action.option_strings and action.default not in (None, False):
            default = action.default
            if isinstance(default, tuple | list):
                default = ",".join(map(str, default))
            assert f"default: {default}" in text, (path, action.dest, text)
        elif action.option_strings and not action.required and action.default is None:
            assert "default" in action.help, (path, action.dest)  # says what absence means


def test_eval_help_lists_agent_and_every_localizer():
    from radspatial.agent.pipeline.types import list_localizers

    text = " ".join(_subparser(build_parser(), "eval").format_help().split())
    assert "agent:<localizer>" in text
    for name in list_localizers():
        assert name in text
