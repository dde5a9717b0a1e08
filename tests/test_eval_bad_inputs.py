"""Every bad input to ``radspatial eval``: exit 2, one stderr line naming the file or flag, no
traceback, and nothing half-written (issue 11). One row per case; the real CLI entry point runs
in-process (``main([...])``), so an uncaught exception fails the row as a traceback would."""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from synth import write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import main
from radspatial.eval.items import MIRP_CENTRES
from radspatial.imaging.volumes import Case


@pytest.fixture(scope="module")
def base_ds(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("bad")
    ct, seg = write_case(tmp / "in")
    out = tmp / "ds"
    config = GenerateConfig(seed=1, size=96, as_count=2, setups=("rq1", "rq3"), export_masks=True)
    build_dataset([Case("synth", ct, seg)], config, out)
    return out


def _rows(ds: Path) -> list[dict]:
    return [json.loads(x) for x in (ds / "manifest.jsonl").read_text().splitlines()]


def _write_rows(ds: Path, rows: list) -> None:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    (ds / "manifest.jsonl").write_text(text)


def _edit(fn: Callable[[list[dict]], list]) -> Callable[[Path, Path], None]:
    def setup(ds: Path, tmp: Path) -> None:
        _write_rows(ds, fn(_rows(ds)))

    return setup


def _set(line: int, **kw) -> Callable[[Path, Path], None]:
    def fn(rows: list[dict]) -> list:
        rows[line - 1].update(kw)
        return rows

    return _edit(fn)


def _drop_key(line: int, key: str) -> Callable[[Path, Path], None]:
    def fn(rows: list[dict]) -> list:
        rows[line - 1].pop(key)
        return rows

    return _edit(fn)


def _torn(ds: Path, tmp: Path) -> None:
    text = (ds / "manifest.jsonl").read_text()
    (ds / "manifest.jsonl").write_text(text[: len(text) - 40])  # cut inside the last row


def _secret(tmp: Path) -> Path:
    secret = tmp / "secret.png"
    secret.write_bytes(b"\x89PNG not really: a file outside the dataset")
    return secret


def _image_symlink(ds: Path, tmp: Path) -> None:
    rows = _rows(ds)
    link = ds / Path(rows[0]["image"]).parent / "link.png"
    link.symlink_to(_secret(tmp))
    rows[0]["image"] = str(link.relative_to(ds))
    _write_rows(ds, rows)


def _image_abs(ds: Path, tmp: Path) -> None:
    rows = _rows(ds)
    rows[0]["image"] = str(_secret(tmp))
    _write_rows(ds, rows)


def _mirp(qa: object, *, raw: str | None = None, centres: str | None = None):
    def setup(ds: Path, tmp: Path) -> None:
        shutil.rmtree(ds)
        (ds / "RQ1" / "images").mkdir(parents=True)
        (ds / "RQ1" / "images" / "a.png").write_bytes(b"png")
        (ds / "RQ1" / "qa.json").write_text(raw if raw is not None else json.dumps(qa))
        if centres is not None:
            (ds / MIRP_CENTRES).write_text(centres)
        _secret(tmp)

    return setup


def _mirp_symlink(ds: Path, tmp: Path) -> None:
    _mirp(GOOD_QA)(ds, tmp)
    (ds / "RQ1" / "images" / "a.png").unlink()
    (ds / "RQ1" / "images" / "a.png").symlink_to(tmp / "secret.png")


def _qa(**kw) -> list[dict]:
    qa = {"object1_name": "liver", "object2_name": "spleen", "question": "Is the liver above "
          "the spleen?", "answer": 1, **kw}  # fmt: skip
    return [{"filename": "a.png", "question_answer": [qa]}]


GOOD_QA = _qa()


def _calls(line: str) -> Callable[[Path, Path], None]:
    """A finished run whose call log then gets ``line`` in the middle."""

    def setup(ds: Path, tmp: Path) -> None:
        out = tmp / "run"
        argv = ["eval", "--data", str(ds), "--model", "baseline:yes", "--out", str(out)]
        assert main([*argv, "--runs", "1", "--limit", "3"]) == 0
        (out / "results.jsonl").unlink()
        log = (out / "calls.jsonl").read_text().splitlines()
        (out / "calls.jsonl").write_text("\n".join([log[0], line, *log[1:]]) + "\n")

    return setup


def _out_file(ds: Path, tmp: Path) -> None:
    (tmp / "run").write_text("not a folder")


def _no_data(ds: Path, tmp: Path) -> None:
    shutil.rmtree(ds)


def _dataset_json(ds: Path, tmp: Path) -> None:
    (ds / "dataset.json").write_text('{"cases": [1, 2')


NO_VLLM = importlib.util.find_spec("vllm") is None
# (name, setup(ds, tmp), extra argv, text the one error line must contain)
CASES: list[tuple[str, Callable | None, list[str], str]] = [
    ("row not an object", _edit(lambda r: [r[0], [1, 2], *r[2:]]), [], "manifest.jsonl: line 2"),
    ("row is null", _edit(lambda r: ["null", *r[1:]]), [], "manifest.jsonl: line 1"),
    ("row missing question", _drop_key(3, "question"), [], "manifest.jsonl: line 3"),
    ("row missing image", _drop_key(2, "image"), [], "manifest.jsonl: line 2"),
    ("row missing answer", _drop_key(1, "answer"), [], "manifest.jsonl: line 1"),
    ("question null", _set(1, question=None), [], "manifest.jsonl: line 1"),
    ("answer maybe", _set(2, answer="maybe"), [], "manifest.jsonl: line 2"),
    ("answer 2", _set(2, answer=2), [], "manifest.jsonl: line 2"),
    ("object1 a string", _set(1, object1="liver"), [], "manifest.jsonl: line 1"),
    ("torn last line", _torn, [], "manifest.jsonl: line"),
    ("garbage middle line", _edit(lambda r: [r[0], "{not json", *r[1:]]), [], "line 2"),
    ("duplicate id", _edit(lambda r: [r[0], r[0], *r[1:]]), [], "appears twice"),
    ("image ../ escape", _set(1, image="../../secret.png"), [], "manifest.jsonl: line 1"),
    ("image absolute", _image_abs, [], "manifest.jsonl: line 1"),
    ("image symlink out", _image_symlink, [], "manifest.jsonl: line 1"),
    ("mask ../ escape", _set(1, mask="../secret.png"), [], "manifest.jsonl: line 1"),
    ("image missing", _set(1, image="RQ1/images/nope.png"), [], "nope.png"),
    ("dataset.json torn", _dataset_json, [], "dataset.json"),
    ("qa.json not a list", _mirp({"filename": "a.png"}), [], "qa.json"),
    ("qa.json invalid", _mirp(None, raw='[{"filename": '), [], "qa.json"),
    ("qa entry not object", _mirp([1]), [], "qa.json: entry 0"),
    ("qa entry no filename", _mirp([{"question_answer": []}]), [], "qa.json: entry 0"),
    (
        "qa no question",
        _mirp([{"filename": "a.png", "question_answer": [{"answer": 1}]}]),
        [],
        "qa.json: entry 0",
    ),  # fmt: skip
    ("qa question null", _mirp(_qa(question=None)), [], "qa.json: entry 0"),
    ("qa answer maybe", _mirp(_qa(answer="maybe")), [], "qa.json: entry 0"),
    (
        "qa filename escape",
        _mirp([{**GOOD_QA[0], "filename": "../../../secret.png"}]),
        [],
        "qa.json: entry 0",
    ),  # fmt: skip
    ("qa image symlink out", _mirp_symlink, [], "qa.json: entry 0"),
    ("centres invalid", _mirp(GOOD_QA, centres="[{"), [], MIRP_CENTRES),
    ("calls.jsonl garbage mid", _calls("{garbage"), [], "calls.jsonl: line 2"),
    ("calls.jsonl non-object", _calls("[1, 2]"), [], "calls.jsonl: line 2"),
    ("--limit 0", None, ["--limit", "0"], "--limit"),
    ("--limit -3", None, ["--limit", "-3"], "--limit"),
    ("--temperature nan", None, ["--temperature", "nan"], "--temperature"),
    ("--temperature -1", None, ["--temperature", "-1"], "--temperature"),
    ("--max-tokens 0", None, ["--max-tokens", "0"], "--max-tokens"),
    ("--runs 0", None, ["--runs", "0"], "--runs"),
    ("--concurrency 0", None, ["--concurrency", "0"], "--concurrency"),
    (
        "--timeout 0",
        None,
        ["--model", "openai-compat:m@http://127.0.0.1:9/v1", "--timeout", "0"],
        "--timeout",
    ),  # fmt: skip
    (
        "--timeout inf",
        None,
        ["--model", "openai-compat:m@http://127.0.0.1:9/v1", "--timeout", "inf"],
        "--timeout",
    ),  # fmt: skip
    (
        "--retries -1",
        None,
        ["--model", "openai-compat:m@http://127.0.0.1:9/v1", "--retries", "-1"],
        "--retries",
    ),  # fmt: skip
    ("--timeout on a baseline", None, ["--timeout", "5"], "--timeout"),
    ("--hf-allow-download on a baseline", None, ["--hf-allow-download"], "--hf-allow-download"),
    (
        "--api-key-env unset",
        None,
        [
            "--model",
            "openai-compat:m@http://127.0.0.1:9/v1",
            "--api-key-env",
            "RADSPATIAL_TEST_UNSET",
        ],
        "RADSPATIAL_TEST_UNSET",
    ),  # fmt: skip
    ("openai: without key", None, ["--model", "openai:gpt-4o"], "OPENAI_API_KEY"),
    ("hf:/nonexistent", None, ["--model", "hf:/nonexistent"], "/nonexistent"),
    ("hf: uncached hub id", None, ["--model", "hf:radspatial-test/not-cached"], "not-cached"),
    ("hf: nothing after", None, ["--model", "hf:"], "hf:"),
    ("agent:unet@/missing", None, ["--model", "agent:unet@/missing"], "/missing"),
    ("agent: nothing after", None, ["--model", "agent:"], "agent:"),
    ("agent:unet no folder", None, ["--model", "agent:unet"], "agent:unet"),
    ("agent:markers@folder", None, ["--model", "agent:markers@/tmp"], "agent:markers"),
    ("agent unknown localizer", None, ["--model", "agent:nope"], "nope"),
    ("unknown prefix", None, ["--model", "foo:bar"], "foo:bar"),
    ("openai-compat no url", None, ["--model", "openai-compat:m"], "openai-compat:m"),
    ("baseline unknown", None, ["--model", "baseline:zzz"], "baseline:zzz"),
    ("--prompt missing", None, ["--prompt", "/nonexistent/prompt.txt"], "prompt.txt"),
    ("--data missing", _no_data, [], "ds"),
    ("--out is a file", _out_file, [], "run"),
]
if NO_VLLM:
    CASES.append(("vllm: without vLLM", None, ["--model", "vllm:org/model"], "vllm"))


def _snapshot(root: Path) -> dict[str, bytes]:
    if root.is_file():
        return {"": root.read_bytes()}
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name, setup, extra, needle", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line(
    name, setup, extra, needle, base_ds, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("RADSPATIAL_TEST_UNSET", raising=False)
    monkeypatch.delenv("RADSPATIAL_HF_ALLOW_DOWNLOAD", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # belt and braces: this test never downloads
    ds = tmp_path / "ds"
    shutil.copytree(base_ds, ds)
    if setup is not None:
        setup(ds, tmp_path)
    out = tmp_path / "run"
    before = _snapshot(out)
    capsys.readouterr()
    # --model is repeatable (several models in one command): a case's own spec replaces the base
    model = [] if "--model" in extra else ["--model", "baseline:yes"]
    argv = ["eval", "--data", str(ds), *model, "--out", str(out), *extra]
    code = main(argv)  # a traceback would raise here
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == 2, err
    assert len(lines) == 1, err
    assert needle in lines[0] and "Traceback" not in err, lines[0]
    assert _snapshot(out) == before  # nothing written, no empty run folder left
