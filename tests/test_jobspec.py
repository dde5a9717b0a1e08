"""One job spec per command, two faces (issue 35): the command's flags and the Python API's
keywords are built from the same dataclass, so every flag maps to a keyword and back, with the
same default; a refused value is named in the caller's terms."""

from __future__ import annotations

import argparse
import inspect
import json

import pytest

from radspatial import api
from radspatial.agent.job import AnswerJob, ServeJob
from radspatial.bench.job import GenerateJob, MirrorJob
from radspatial.cli import build_parser
from radspatial.core import jobspec
from radspatial.eval.job import EvalJob
from radspatial.formats.job import (
    ExportHFJob,
    ExportLmmsJob,
    ExportMirpJob,
    ImportInspectJob,
    ImportLmmsJob,
)
from radspatial.phantoms.job import PhantomJob
from radspatial.probes.job import ProbeBuildJob, ProbeEvalJob, ProbeTableJob, ProbeTrainJob
from radspatial.reports.job import ReportJob, SparTableJob
from radspatial.training.job import TrainUnetJob

# (command, API function, spec, keywords only the API has: each says why in its help)
FACES = [
    ("generate", api.generate, GenerateJob, {"verbose"}),
    ("eval", api.evaluate, EvalJob, {"progress"}),
    ("report", api.report, ReportJob, set()),
    ("spar-table", api.spar_table, SparTableJob, set()),
    ("export mirp", api.export_mirp, ExportMirpJob, set()),
    ("export hf", api.export_hf, ExportHFJob, set()),
    ("phantom", api.phantom, PhantomJob, {"progress"}),
    ("counterfactual mirror", api.mirror_case, MirrorJob, set()),
    ("export lmms-eval", api.export_lmms, ExportLmmsJob, set()),
    ("import lmms-eval", api.import_lmms, ImportLmmsJob, set()),
    ("import inspect", api.import_inspect, ImportInspectJob, set()),
    ("agent", api.answer, AnswerJob, set()),
    ("serve", api.serve, ServeJob, set()),
    ("train unet", api.train_unet, TrainUnetJob, {"progress"}),
    ("agent train", api.train_unet, TrainUnetJob, {"progress"}),  # the deprecated name
    ("probe build", api.probe_build, ProbeBuildJob, {"progress"}),
    ("probe train", api.probe_train, ProbeTrainJob, {"progress"}),
    ("probe eval", api.probe_eval, ProbeEvalJob, set()),
    ("probe table", api.probe_table, ProbeTableJob, set()),
]


def _subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in command.split():
        parser = parser._subparsers._group_actions[0].choices[name]
    return parser


def _flags(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Every option and positional argument of ``parser`` by its dest (help left out)."""
    return {
        a.dest: a
        for a in parser._actions
        if a.dest != "help" and not isinstance(a, argparse._SubParsersAction)
    }


@pytest.mark.parametrize(("command", "fn", "spec", "api_only"), FACES, ids=[f[0] for f in FACES])
def test_every_flag_is_a_keyword_and_back_with_the_same_default(command, fn, spec, api_only):
    flags = _flags(_subparser(command))
    params = inspect.signature(fn).parameters
    cli_only = {f.name for f in jobspec.fields(spec, "cli")} - {
        f.name for f in jobspec.fields(spec, "api")
    }  # printing choices (agent --json)
    assert set(params) - set(flags) == api_only
    assert set(flags) - set(params) == cli_only
    for dest, action in flags.items():
        if dest in cli_only:
            continue
        param = params[dest]
        if action.required:
            assert param.default is inspect.Parameter.empty, dest
            continue
        default = None if action.default is argparse.SUPPRESS else action.default
        if action.const is False and action.default is None:  # --no-group: group=False
            assert param.default is None, dest
            continue
        assert param.default == default, (dest, param.default, default)


def test_the_spec_declares_the_flag_names_help_and_defaults_the_cli_shows():
    flags = _flags(_subparser("generate"))
    assert flags["group"].option_strings == ["--no-group"] and flags["group"].const is False
    assert flags["png_level"].default == 3 and flags["size"].default == 512
    assert "zlib level" in flags["png_level"].help
    assert _flags(_subparser("eval"))["model"].nargs == "+"


def test_the_api_takes_every_generate_config_field():
    """``GenerateConfig``'s fields are all reachable from ``api.generate`` (the rule profile
    and thresholds flat, ``question_types`` as ``questions``)."""
    import dataclasses

    from radspatial.bench.config import GenerateConfig

    params = set(inspect.signature(api.generate).parameters)
    renamed = {"rules": "rules", "question_types": "questions"}
    for f in dataclasses.fields(GenerateConfig):
        assert renamed.get(f.name, f.name) in params, f.name
    assert {"min_distance", "margin", "size_tolerance", "min_component"} <= params
    eval_params = set(inspect.signature(api.evaluate).parameters)
    assert {"judge", "judge_all", "prompt", "executor", "price"} <= eval_params


def test_the_marker_default_is_the_registry_s():
    from radspatial.imaging.markers import MARKER_TYPES

    assert GenerateJob.__dataclass_fields__["markers"].default == MARKER_TYPES


def test_api_values_are_read_as_the_flags_read_them():
    job = jobspec.from_keywords(
        GenerateJob,
        {"out": "x", "questions": ["spar"], "window": "300,50", "modality": "mr", "setups": "RQ1"},
    )
    assert job.questions[:1] == ("spar_relpos",) and len(job.questions) == 5
    assert job.window == (300.0, 50.0) and job.modality == "MR" and job.setups == ("rq1",)
    assert str(job.out) == "x" and not isinstance(job.out, str)


@pytest.mark.parametrize(
    ("keywords", "flags", "api_words", "cli_words"),
    [
        ({"size": 10}, ["--size", "10"], "size= must be between 64", "--size must be between 64"),
        ({"png_level": 12}, ["--png-level", "12"], "png_level= must be 0..9", "--png-level must"),
        ({"margin": -1}, ["--margin", "-1"], "margin= must be a finite", "--margin must be a"),
        ({"window": "x"}, None, "window= wants W,L", None),
        ({"questions": ["nope"]}, None, "questions= unknown question type 'nope'", None),
    ],
)
def test_generate_errors_name_the_parameter_in_the_caller_s_terms(
    tmp_path, capsys, keywords, flags, api_words, cli_words
):
    from radspatial.cli import main

    with pytest.raises(ValueError) as refused:
        api.generate(tmp_path / "api", **keywords)
    assert api_words in str(refused.value) and "--" not in str(refused.value)
    if flags is not None:
        assert main(["generate", "--out", str(tmp_path / "cli"), *flags]) == 2
        assert cli_words in capsys.readouterr().err
    assert not (tmp_path / "api").exists() and not (tmp_path / "cli").exists()


def test_eval_errors_name_the_parameter_in_the_caller_s_terms(tmp_path, capsys):
    from radspatial.cli import main

    with pytest.raises(ValueError, match=r"^runs= must be >= 1, got 0$"):
        api.evaluate(tmp_path, "baseline:yes", tmp_path / "run", runs=0)
    with pytest.raises(ValueError, match=r"^replicas= must be >= 1"):
        api.evaluate(tmp_path, "hf:/m", tmp_path / "run", executor="ray", replicas=0)
    code = main(["eval", "--data", str(tmp_path), "--model", "baseline:yes", "--out",
                 str(tmp_path / "run"), "--runs", "0"])  # fmt: skip
    assert code == 2 and "--runs must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_an_unknown_keyword_is_refused_by_name():
    with pytest.raises(TypeError, match="generate\\(\\): .*'sizes'"):
        api.generate("x", sizes=128)
    with pytest.raises(TypeError, match="evaluate\\(\\): missing .*'out'"):
        api.evaluate("data", "baseline:yes")


def test_the_api_and_the_cli_write_the_same_dataset(tmp_path, capsys):
    """Options the API lacked before job specs (planes, per_slice, window, png_level, group)
    reach the generator: the API's dataset is the CLI's, byte for byte."""
    from radspatial.cli import main

    flags = ["--size", "96", "--setups", "rq1", "--questions", "size", "--planes", "coronal"]
    flags += ["--per-slice", "2", "--window", "350,50", "--png-level", "1", "--no-group"]
    assert main(["generate", "--out", str(tmp_path / "cli"), *flags]) == 0
    api.generate(tmp_path / "api", size=96, setups=["rq1"], questions="size", planes=("coronal",),
                 per_slice=2, window=(350, 50), png_level=1, group=False)  # fmt: skip
    cli, py = tmp_path / "cli", tmp_path / "api"
    files = sorted(p.relative_to(cli) for p in cli.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(py) for p in py.rglob("*") if p.is_file())
    assert all((cli / f).read_bytes() == (py / f).read_bytes() for f in files)
    config = json.loads((py / "dataset.json").read_text())["config"]
    assert config["planes"] == ["coronal"] and config["per_slice"] == 2
    assert config["window"] == [350.0, 50.0] and config["png_level"] == 1
    assert config["group"] is False


def test_positional_arguments_stay_positional_on_both_faces():
    """``report RUN [RUN ...] --out OUT`` on the command line; ``report(runs, out)`` in Python."""
    runs = _flags(_subparser("report"))["runs"]
    assert not runs.option_strings and runs.nargs == "+"
    assert list(inspect.signature(api.report).parameters)[:2] == ["runs", "out"]
    assert list(inspect.signature(api.export_hf).parameters)[:2] == ["data", "out"]
    assert list(inspect.signature(api.export_mirp).parameters)[:2] == ["run", "out"]
    assert list(inspect.signature(api.mirror_case).parameters) == ["ct", "seg", "out", "labels"]


def test_export_errors_name_the_parameter_in_the_caller_s_terms(tmp_path, capsys):
    """The same refusal from ``formats/hf_export``, worded by each face; nothing is written."""
    from radspatial.cli import main

    data = tmp_path / "ds"
    api.generate(data, size=64, setups=["rq1"], as_count=0)
    with pytest.raises(ValueError, match=r"^max_shard_mb= must be a finite number > 0, got 0"):
        api.export_hf(data, tmp_path / "api", max_shard_mb=0)
    with pytest.raises(ValueError, match=r"^license= 'a b': not a licence id"):
        api.export_hf(data, tmp_path / "api", license="a b")
    with pytest.raises(ValueError, match=r"^name= must be letters, digits and _"):
        api.export_lmms(data, tmp_path / "api", name="a-b")
    with pytest.raises(ValueError, match=r"^protocol= must be one of radspatial, mirp"):
        api.export_lmms(data, tmp_path / "api", protocol="x")
    lmms = ["export", "lmms-eval", "--data", str(data), "--out", str(tmp_path / "cli")]
    assert main([*lmms, "--name", "a-b"]) == 2
    assert "--name must be letters, digits and _" in capsys.readouterr().err
    argv = ["export", "hf", "--data", str(data), "--out", str(tmp_path / "cli")]
    assert main([*argv, "--max-shard-mb", "0"]) == 2
    assert "--max-shard-mb must be a finite number > 0, got 0.0" in capsys.readouterr().err
    assert main([*argv, "--license", "a b"]) == 2
    assert "--license 'a b': not a licence id" in capsys.readouterr().err
    assert not (tmp_path / "api").exists() and not (tmp_path / "cli").exists()


@pytest.mark.parametrize(
    ("keywords", "api_words", "flags", "cli_words"),
    [
        ({"workers": 0}, "workers= must be >= 1, got 0", ["--workers", "0"],
         "--workers must be >= 1, got 0"),
        ({"on_error": "x"}, "on_error= must be one of stop, skip", None, None),
    ],
)  # fmt: skip
def test_dataset_checks_name_the_parameter_in_the_caller_s_terms(
    tmp_path, capsys, keywords, api_words, flags, cli_words
):
    from radspatial.cli import main

    with pytest.raises(ValueError, match="^" + api_words):
        api.generate(tmp_path / "api", **keywords)
    if flags:
        assert main(["generate", "--out", str(tmp_path / "cli"), *flags]) == 2
        assert cli_words in capsys.readouterr().err


def test_decoding_and_executor_checks_name_the_parameter_in_the_caller_s_terms(tmp_path, capsys):
    from radspatial.cli import main

    run = tmp_path / "run"
    for keywords, words in (
        ({"temperature": -1}, "temperature= must be a finite number >= 0"),
        ({"max_tokens": 0}, "max_tokens= must be >= 1, got 0"),
        ({"replicas": 2}, "replicas= and ray_address= need executor= ray"),
        ({"executor": "ray"}, "baseline:yes: executor= ray applies to hf/vllm models only"),
        ({"price": "input=1"}, "price= needs both input= and output=, got 'input=1'"),
    ):
        with pytest.raises(ValueError, match="^" + words):
            api.evaluate(tmp_path, "baseline:yes", run, **keywords)
    argv = ["eval", "--data", str(tmp_path), "--model", "baseline:yes", "--out", str(run)]
    for flags, words in (
        (["--temperature", "-1"], "--temperature must be a finite number >= 0"),
        (["--max-tokens", "0"], "--max-tokens must be >= 1, got 0"),
        (["--replicas", "2"], "--replicas and --ray-address need --executor ray"),
    ):
        assert main([*argv, *flags]) == 2
        assert words in capsys.readouterr().err
    with pytest.raises(SystemExit, match="2"):  # argparse's own refusal names the flag once
        main([*argv, "--price", "input=1"])
    assert "argument --price: needs both input= and output=" in capsys.readouterr().err
    assert not run.exists()


def test_the_phantom_api_and_cli_write_the_same_phantoms(tmp_path, capsys):
    """``radspatial.phantom`` reads its values as the flags are read (a comma list or a list),
    and writes the files ``radspatial phantom`` writes; a refused count is named per face."""
    from radspatial.cli import main

    flags = ["--shape", "24,24,8", "--variant", "normal,situs_inversus", "--n", "2", "--seed", "3"]
    assert main(["phantom", "--out", str(tmp_path / "cli"), *flags]) == 0
    api.phantom(tmp_path / "api", shape=(24, 24, 8), variant="normal,situs_inversus", n=2,
                seed=3, progress=False)  # fmt: skip
    cli, py = tmp_path / "cli", tmp_path / "api"
    files = sorted(p.relative_to(cli) for p in cli.rglob("*") if p.is_file())
    assert len(files) >= 5 and files == sorted(
        p.relative_to(py) for p in py.rglob("*") if p.is_file()
    )
    assert all((cli / f).read_bytes() == (py / f).read_bytes() for f in files if f.suffix == ".gz")
    with pytest.raises(ValueError, match=r"^n= must be >= 1, got 0$"):
        api.phantom(tmp_path / "none", n=0)
    assert main(["phantom", "--out", str(tmp_path / "none"), "--n", "0"]) == 2
    assert "--n must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("keywords", "flags", "api_words", "cli_words"),
    [
        ({"model_args": "x"}, ["--model-args", "x"], "model_args=: expected key=value",
         "--model-args: expected key=value"),
        ({"model_args": "colour=red"}, ["--model-args", "colour=red"],
         "baseline:yes: model_args= colour is not an option here",
         "baseline:yes: --model-args colour is not an option here"),
        ({"timeout": 5}, ["--timeout", "5"], "baseline:yes: timeout= applies to openai",
         "baseline:yes: --timeout applies to openai"),
        ({"hf_allow_download": True}, ["--hf-allow-download"],
         "baseline:yes: hf_allow_download= applies to hf models only",
         "baseline:yes: --hf-allow-download applies to hf models only"),
    ],
)  # fmt: skip
def test_backend_options_name_the_parameter_in_the_caller_s_terms(
    tmp_path, capsys, keywords, flags, api_words, cli_words
):
    from radspatial.cli import main

    run = tmp_path / "run"
    with pytest.raises(ValueError, match="^" + api_words):
        api.evaluate(tmp_path, "baseline:yes", run, **keywords)
    argv = ["eval", "--data", str(tmp_path), "--model", "baseline:yes", "--out", str(run)]
    assert main([*argv, *flags]) == 2
    assert cli_words in capsys.readouterr().err
    assert not run.exists()


def test_an_output_on_its_input_is_named_in_the_caller_s_terms(tmp_path, capsys):
    """``core/safepath.check_disjoint``'s refusal is a ParamError: ``--out``/``--data`` on the
    command line, ``out=``/``data=`` in Python; nothing is replaced."""
    from radspatial.cli import main
    from radspatial.core.safepath import OverlapError, PathEscapeError, check_disjoint

    data = tmp_path / "ds"
    api.generate(data, size=96, setups=["rq1"], as_count=0)
    before = sorted(p.name for p in data.iterdir())
    with pytest.raises(ValueError, match=r"^out= .*: lies inside the input data= .*\(choose an"):
        api.export_hf(data, data / "hf")
    with pytest.raises(ValueError, match=r"^out= .*: is the input data= "):
        api.evaluate(data, "baseline:yes", data, runs=1)
    assert main(["export", "hf", "--data", str(data), "--out", str(data / "hf")]) == 2
    assert "--out " in (err := capsys.readouterr().err) and "the input --data " in err
    assert sorted(p.name for p in data.iterdir()) == before
    with pytest.raises(OverlapError) as refused:  # still a path refusal, for callers that ask
        check_disjoint(data, {"run #1": data})
    assert isinstance(refused.value, PathEscapeError) and "the input run #1 " in str(refused.value)
