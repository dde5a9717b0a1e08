"""The job specs of agent, serve, train unet, demo and probe (issue 35): ``radspatial agent``
and ``radspatial.answer`` give the same answer, ``probe build`` and ``radspatial.probe_build``
the same dataset; a refused value is named in the caller's terms (no server is left running,
no model trained)."""

from __future__ import annotations

import inspect
import json
import socket

import pytest

from radspatial import api
from radspatial.cli import main


def _marked_slice(tmp_path):
    """One generated RQ1 item: its image and question (the markers localizer reads it)."""
    data = tmp_path / "ds"
    api.generate(data, size=96, setups=["rq1"], as_count=0, questions="relative_position")
    row = json.loads((data / "manifest.jsonl").read_text().splitlines()[0])
    return data / row["image"], row["question"]


def test_answer_and_agent_give_the_same_trace(tmp_path, capsys):
    image, question = _marked_slice(tmp_path)
    result = api.answer(image, question, localizer="markers", trace=tmp_path / "api.json")
    argv = ["agent", "--image", str(image), "--question", question, "--localizer", "markers"]
    assert main([*argv, "--trace", str(tmp_path / "cli.json")]) == 0
    assert "answer: " in capsys.readouterr().out
    written, printed = (json.loads((tmp_path / f).read_text()) for f in ("api.json", "cli.json"))
    for trace in (written, printed, result.trace):
        trace.pop("timings_ms")  # wall-clock, the one part that differs
    assert written == printed == result.trace and written["decision"]
    assert list(inspect.signature(api.answer).parameters)[:2] == ["image", "question"]


def test_agent_refusals_name_the_parameter_in_the_caller_s_terms(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^image= and question= are both needed$"):
        api.answer(tmp_path / "x.png")
    assert main(["agent", "--question", "Is A left of B?"]) == 2
    assert "--image and --question are both needed" in capsys.readouterr().err
    image, question = _marked_slice(tmp_path)
    from PIL import Image

    Image.new("L", (5, 7)).save(tmp_path / "mask.png")
    with pytest.raises(ValueError, match=r"mask= is 7x5 .* the size of image= \(96x96\)"):
        api.answer(image, question, localizer="mask", mask=tmp_path / "mask.png")
    argv = ["agent", "--image", str(image), "--question", question, "--localizer", "mask"]
    assert main([*argv, "--mask", str(tmp_path / "mask.png")]) == 2
    err = capsys.readouterr().err
    assert (
        "--mask is 7x5 (rows x columns), expected a one-channel label image the size of --image"
        in err
    )


def test_serve_refusals_name_the_parameter_in_the_caller_s_terms(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("RADSPATIAL_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ValueError, match=r"^api_key_env= RADSPATIAL_TEST_UNSET_KEY: that var"):
        api.serve(api_key_env="RADSPATIAL_TEST_UNSET_KEY")
    assert main(["serve", "--api-key-env", "RADSPATIAL_TEST_UNSET_KEY"]) == 2
    assert "--api-key-env RADSPATIAL_TEST_UNSET_KEY: that variable" in capsys.readouterr().err
    with pytest.raises(ValueError, match=r"^api_key= and api_key_env=: give one"):
        api.serve(api_key="k", api_key_env="HOME")
    with pytest.raises(ValueError, match=r"^threads= must be > 0"):
        api.serve(threads="0")
    with socket.socket() as taken:  # a bound port, kept bound: serving there is refused
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(ValueError, match=rf"^port= {port}: cannot serve on 127.0.0.1:{port}"):
            api.serve(port=port, localizers=["markers"])
        assert main(["serve", "--port", str(port), "--localizer", "markers"]) == 2
        assert f"--port {port}: cannot serve on 127.0.0.1:{port}" in capsys.readouterr().err


def test_train_unet_refusals_name_the_parameter_before_torch_loads(tmp_path, capsys):
    """``radspatial.train_unet`` and ``radspatial train unet`` refuse the same values, worded
    per face, before training starts (nothing is written)."""
    data = tmp_path / "ds"
    data.mkdir()
    with pytest.raises(ValueError, match=r"^out= .*: lies inside the input data= "):
        api.train_unet(data, data / "m")
    with pytest.raises(ValueError, match=r"^epochs= must be >= 1, got 0$"):
        api.train_unet(data, tmp_path / "m", epochs=0)
    with pytest.raises(ValueError, match=r"^size= 100 must be in 16\.\.1024 px and divisible"):
        api.train_unet(data, tmp_path / "m", size="100")
    argv = ["train", "unet", "--data", str(data), "--out", str(tmp_path / "m")]
    assert main([*argv, "--size", "100"]) == 2
    assert "--size 100 must be in 16..1024 px" in capsys.readouterr().err
    assert main([*argv, "--threads", "0"]) == 2
    assert "--threads must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "m").exists() and list(data.iterdir()) == []


def test_the_unet_job_s_strides_are_the_trainer_s():
    from radspatial.training.job import UNET_STRIDES
    from radspatial.training.unet_train import TrainConfig

    assert 2 ** (len(TrainConfig().channels) - 1) == UNET_STRIDES


def test_demo_s_flags_are_its_job_spec_s_fields(tmp_path, capsys):
    """``radspatial demo`` has a job spec (no Python function: the demo is generate, evaluate
    and report in a row); a refused count stops it before anything is generated."""
    from radspatial.cli import build_parser
    from radspatial.cli.demo import DemoJob
    from radspatial.core import jobspec

    demo = build_parser()._subparsers._group_actions[0].choices["demo"]
    flags = {a.dest: a for a in demo._actions if a.dest != "help"}
    assert set(flags) == {f.name for f in jobspec.fields(DemoJob)}
    assert flags["runs"].default == 3 and flags["model"].option_strings == ["--model"]
    assert main(["demo", "--out", str(tmp_path / "demo"), "--runs", "0"]) == 2
    assert "--runs must be >= 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "demo").exists()


def test_probe_build_api_and_cli_write_the_same_dataset(tmp_path, capsys):
    """``radspatial.probe_build`` takes ``probe build``'s options (the bundled CT by default,
    comma lists or lists); ``build_probes(cases, out, ...)`` underneath keeps its signature."""
    import radspatial

    flags = ["--size", "64", "--crop", "32", "--tasks", "orient", "--max-per-case", "4"]
    assert main(["probe", "build", "--out", str(tmp_path / "cli"), *flags]) == 0
    info = api.probe_build(tmp_path / "api", size=64, crop=32, tasks=["orient"], max_per_case=4,
                           progress=False)  # fmt: skip
    assert info["n_cases"] == 1 and set(info["tasks"]) == {"orient"}
    cli, py = tmp_path / "cli", tmp_path / "api"
    files = sorted(p.relative_to(cli) for p in cli.rglob("*") if p.is_file())
    assert files and files == sorted(p.relative_to(py) for p in py.rglob("*") if p.is_file())
    assert all((cli / f).read_bytes() == (py / f).read_bytes() for f in files)
    assert list(inspect.signature(radspatial.build_probes).parameters)[:2] == ["cases", "out"]
    with pytest.raises(ValueError, match=r"^splits= expected three fractions 0-1"):
        api.probe_build(tmp_path / "bad", splits=(1, 1, 1))
    assert list(inspect.signature(api.probe_train).parameters)[:2] == ["data", "out"]


def test_probe_eval_takes_the_batch_and_device_evaluate_probe_takes():
    from radspatial.cli import build_parser
    from radspatial.core.jobspec import from_namespace
    from radspatial.probes.job import ProbeEvalJob

    argv = ["probe", "eval", "--model", "m", "--data", "d", "--batch-size", "8", "--device", "cpu"]
    job = from_namespace(ProbeEvalJob, build_parser().parse_args(argv))
    assert (job.batch_size, job.device, job.split, job.out) == (8, "cpu", "test", None)
    params = inspect.signature(api.probe_eval).parameters
    assert params["batch_size"].default == 64 and params["device"].default == "cpu"


def test_probe_build_checks_name_the_parameter_in_the_caller_s_terms(tmp_path, capsys):
    with pytest.raises(ValueError, match=r"^crop= must be a multiple of 4 and >= 16, got 30$"):
        api.probe_build(tmp_path / "api", crop=30)
    with pytest.raises(ValueError, match=r"^tasks=: unknown probe task\(s\) \['nope'\]"):
        api.probe_build(tmp_path / "api", tasks="nope")
    assert main(["probe", "build", "--out", str(tmp_path / "cli"), "--size", "10"]) == 2
    assert "--size must be >= 64 px, got 10" in capsys.readouterr().err
    assert not (tmp_path / "api").exists() and not (tmp_path / "cli").exists()


def test_probe_table_keeps_write_table_s_signature_and_gains_split():
    """``radspatial.probe_table`` was ``write_table(result_dirs, out, *, split)``: the spec-built
    function keeps that signature, and ``probe table --split`` reaches the same keyword."""
    from radspatial.cli import build_parser
    from radspatial.probes.table import write_table

    ours, theirs = inspect.signature(api.probe_table), inspect.signature(write_table)
    assert [(p.name, p.kind, p.default) for p in ours.parameters.values()] == [
        (p.name, p.kind, p.default) for p in theirs.parameters.values()
    ]
    args = build_parser().parse_args(["probe", "table", "r1", "r2", "--out", "t", "--split", "val"])
    assert [str(r) for r in args.result_dirs] == ["r1", "r2"] and args.split == "val"
