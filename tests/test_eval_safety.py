"""Issue 11, evaluation side: data paths stay in the dataset, keys go only where sent, one writer
per run folder, interrupted runs say so, errors are not wrong answers. Real files, a real HTTP
server on localhost (tests/fake_server.py) and real processes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fake_server import FakeChatServer
from synth import write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import main
from radspatial.core.datafiles import DataFileError
from radspatial.core.safepath import PathEscapeError, inside
from radspatial.eval.aggregate import compute_metrics
from radspatial.eval.items import load_items
from radspatial.imaging.volumes import Case
from radspatial.models.base import create_backend
from radspatial.models.openai_compat import is_loopback

SECRET_KEY = "sk-test-SECRET-issue11"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("hard")
    ct, seg = write_case(tmp / "in")
    out = tmp / "ds"
    config = GenerateConfig(seed=2, size=96, as_count=2, setups=("rq1", "rq3"), export_masks=True)
    build_dataset([Case("synth", ct, seg)], config, out)
    return out


@pytest.fixture
def ds(dataset: Path, tmp_path: Path) -> Path:
    out = tmp_path / "ds"
    shutil.copytree(dataset, out)
    return out


def _rewrite_row(ds: Path, **kw) -> None:
    lines = (ds / "manifest.jsonl").read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), **kw})
    (ds / "manifest.jsonl").write_text("\n".join(lines) + "\n")


# --- 1. path containment -------------------------------------------------------------------


def test_inside_refuses_escapes_and_keeps_inner_paths(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "x.png").write_bytes(b"x")
    (tmp_path / "out.png").write_bytes(b"secret")
    (root / "a" / "in_link.png").symlink_to(root / "a" / "x.png")  # symlink inside: fine
    (root / "a" / "out_link.png").symlink_to(tmp_path / "out.png")
    (root / "dirlink").symlink_to(tmp_path)  # a folder link leading out
    assert inside(root, "a/x.png", where="f: line 1") == root / "a" / "x.png"
    assert inside(root, "a/../a/x.png", where="f") == root / "a/../a/x.png"
    assert inside(root, "a/in_link.png", where="f") == root / "a" / "in_link.png"
    for bad in ("../out.png", "a/../../out.png", str(tmp_path / "out.png"), "/etc/hostname",
                "a/out_link.png", "dirlink/out.png", "", None, 3, "a/\x00.png"):  # fmt: skip
        with pytest.raises(PathEscapeError, match=r"^f: line 7: image"):
            inside(root, bad, where="f: line 7", what="image")


@pytest.mark.parametrize(
    "field, value",
    [("image", "../../secret.png"), ("image", "SECRET_ABS"), ("mask", "../secret.png")],
)
def test_manifest_paths_must_stay_in_the_dataset(ds: Path, field: str, value: str) -> None:
    secret = ds.parent / "secret.png"
    secret.write_bytes(b"secret")
    _rewrite_row(ds, **{field: str(secret) if value == "SECRET_ABS" else value})
    with pytest.raises(PathEscapeError, match=rf"manifest.jsonl: line 1: {field} "):
        load_items(ds)


def test_manifest_symlink_leading_out_is_refused(ds: Path) -> None:
    (ds.parent / "secret.png").write_bytes(b"secret")
    row = json.loads((ds / "manifest.jsonl").read_text().splitlines()[0])
    image = ds / row["image"]
    image.unlink()
    image.symlink_to(ds.parent / "secret.png")  # same name in the manifest, content elsewhere
    with pytest.raises(PathEscapeError, match="manifest.jsonl: line 1: image .* outside"):
        load_items(ds)


def _mirp(root: Path, filename: str) -> None:
    (root / "RQ2" / "image_dots").mkdir(parents=True)
    (root / "RQ2" / "image_dots" / "a.png").write_bytes(b"png")
    qa = {"question": "Is the liver (red dot) above the spleen (blue dot)?", "answer": 0}
    entries = [{"filename": filename, "question_answer": [qa]}]
    (root / "RQ2" / "qa_dots.json").write_text(json.dumps(entries))


@pytest.mark.parametrize("filename", ["../../../secret.png", "/etc/hostname", "link.png"])
def test_mirp_filenames_must_stay_in_the_dataset(tmp_path: Path, filename: str) -> None:
    root = tmp_path / "mirp"
    _mirp(root, filename)
    (tmp_path / "secret.png").write_bytes(b"secret")
    (root / "RQ2" / "image_dots" / "link.png").symlink_to(tmp_path / "secret.png")
    # a name with a folder part is refused as a file name, a symlink out as an escape
    with pytest.raises(
        (PathEscapeError, DataFileError), match=r"qa_dots.json: entry 0: '?filename"
    ):
        load_items(root)
    _mirp(tmp_path / "ok", "a.png")
    assert [i.image.name for i in load_items(tmp_path / "ok")] == ["a.png"]


def test_escaping_image_never_reaches_the_model(ds: Path, tmp_path: Path, capsys) -> None:
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"root:x:0:0:secret")
    _rewrite_row(ds, image="../secret.png")
    with FakeChatServer() as server:
        model = f"openai-compat:m@{server.base_url}"
        code = main(["eval", "--data", str(ds), "--model", model, "--out", str(tmp_path / "r")])
    assert code == 2 and server.calls == 0
    assert "manifest.jsonl: line 1: image '../secret.png'" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_unet_training_data_paths_are_contained(ds: Path) -> None:
    from radspatial.nets.unet import read_slices

    assert read_slices(ds)  # the clean dataset reads
    _rewrite_row(ds, mask="../../x.png")
    with pytest.raises(PathEscapeError, match="manifest.jsonl: row .*: mask"):
        read_slices(ds)


# --- 2. API keys ---------------------------------------------------------------------------


def _eval(ds: Path, out: Path, model: str, *extra: str) -> int:
    argv = ["eval", "--data", str(ds), "--model", model, "--out", str(out), "--runs", "1"]
    return main([*argv, "--limit", "2", *extra])


def test_openai_compat_sends_a_key_only_when_asked(ds, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET_KEY)
    monkeypatch.setenv("MY_SERVER_KEY", SECRET_KEY + "-mine")
    with FakeChatServer() as server:
        model = f"openai-compat:m@{server.base_url}"
        assert _eval(ds, tmp_path / "a", model) == 0
        n = server.calls
        assert n == 2 and all("authorization" not in h for h in server.headers)
        assert _eval(ds, tmp_path / "b", model, "--api-key-env", "MY_SERVER_KEY") == 0
        sent = {h.get("authorization") for h in server.headers[n:]}
    assert sent == {f"Bearer {SECRET_KEY}-mine"}
    assert "warning" not in capsys.readouterr().err  # loopback: no plain-http warning
    for run in ("a", "b"):
        assert SECRET_KEY not in (tmp_path / run / "run.json").read_text()


def test_plain_http_key_to_another_host_warns(monkeypatch, capsys) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", SECRET_KEY)
    create_backend("openai-compat:m@http://10.20.30.40:8000/v1", api_key_env="MY_SERVER_KEY")
    err = capsys.readouterr().err
    assert "warning" in err and "plain http" in err and "10.20.30.40" in err
    assert SECRET_KEY not in err
    create_backend("openai-compat:m@https://10.20.30.40/v1", api_key_env="MY_SERVER_KEY")
    create_backend("openai-compat:m@http://localhost:8000/v1", api_key_env="MY_SERVER_KEY")
    create_backend("openai-compat:m@http://10.20.30.40:8000/v1")  # no key: nothing to leak
    assert capsys.readouterr().err == ""


def test_is_loopback() -> None:
    assert is_loopback("http://127.0.0.1:8000/v1") and is_loopback("http://localhost/v1")
    assert is_loopback("http://[::1]:8000/v1") and is_loopback("http://127.9.9.9/v1")
    assert not is_loopback("http://10.0.0.1/v1") and not is_loopback("http://example.com/v1")
    assert not is_loopback("http://localhost.example.com/v1")


# --- 8. errors are not wrong answers ---------------------------------------------------------


def test_failed_calls_are_errors_exit_3_then_resume(ds, tmp_path, capsys) -> None:
    out = tmp_path / "run"
    with FakeChatServer(always_status=503, answer=lambda body: "1") as server:
        model = f"openai-compat:m@{server.base_url}"
        assert _eval(ds, out, model, "--retries", "1", "--timeout", "5") == 3
        captured = capsys.readouterr()
        assert server.calls == 4  # 2 items x (1 call + 1 retry)
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["n_errors"] == 2 and metrics["overall"] == {"n_items": 0}
        assert json.loads((out / "run.json").read_text())["status"] == "incomplete"
        assert "no answered calls (errors 2 of 2)" in captured.out
        retries = [x for x in captured.err.splitlines() if "(attempt 1 of 2), retrying" in x]
        assert len(retries) == 2 and "HTTP 503" in retries[0]
        assert "to resume, rerun the same command: radspatial eval --data" in captured.err
        server.always_status = None  # the server recovers: the same command finishes the run
        assert _eval(ds, out, model, "--retries", "1", "--timeout", "5") == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_errors"] == 0 and metrics["overall"]["n_items"] == 2


def test_a_server_that_never_answers_shows_retry_lines(ds, tmp_path, capsys) -> None:
    release = threading.Event()  # nothing is answered until the run has ended on its own
    with FakeChatServer(answer=lambda body: release.wait(120) and "late") as server:
        model = f"openai-compat:m@{server.base_url}"
        try:
            code = _eval(ds, tmp_path / "r", model, "--timeout", "0.2", "--retries", "1")
        finally:
            release.set()
    err = capsys.readouterr().err
    assert code == 3
    assert err.count("Timeout (no whole reply within 0.2 s) (attempt 1 of 2), retrying") == 2


def test_errors_are_excluded_from_accuracy() -> None:
    def row(i: int, parsed: int | None, error: str | None = None) -> dict:
        return {"id": f"q{i}", "run": 0, "setup": "rq1", "marker": "none", "question": "Q?",
                "relation": "above",
                "transform": None, "variant": "normal", "pair": None, "expected": 1,
                "expected_canonical": None, "parsed": parsed, "correct": parsed == 1,
                "error": error}  # fmt: skip

    rows = [row(0, 1), row(1, 1), row(2, 0), row(3, None), row(4, None, "HTTP 503")]
    m = compute_metrics(rows, model="m", runs=1).to_json()
    assert m["n_errors"] == 1 and "errors" not in m and m["n_rows"] == 5
    o = m["overall"]
    assert o["n_items"] == 4 and o["accuracy_mean"] == 0.5  # 2 of 4 answered; invalid is wrong
    assert o["invalid_rate"] == 0.25


# --- 7. one writer per run folder; interrupted runs say so ----------------------------------


def _spawn(ds: Path, out: Path, url: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "radspatial.cli", "eval", "--data", str(ds), "--out", str(out),
           "--model", f"openai-compat:m@{url}", "--runs", "1", "--concurrency", "1"]  # fmt: skip
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_calls(out: Path, n: int, proc: subprocess.Popen) -> None:
    log = out / "calls.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline:
        if log.exists() and len(log.read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError("the eval made no progress")


def test_second_eval_on_one_folder_is_refused_and_signals_mark_interrupted(ds, tmp_path) -> None:
    out = tmp_path / "run"
    answering = threading.Event()  # cleared: the first run waits on its call, however long
    answering.set()

    def answer(body: dict) -> str:
        assert answering.wait(600), "the test never let the server answer"
        return "yes"

    with FakeChatServer(latency_s=0.15, answer=answer) as server, FakeChatServer() as other:
        first = _spawn(ds, out, server.base_url)
        _wait_for_calls(out, 2, first)
        answering.clear()  # the first run outlasts the second's start, whatever the machine
        try:
            second = _spawn(ds, out, other.base_url)
            _, err = second.communicate(timeout=600)
        finally:
            answering.set()
        assert second.returncode == 2, err
        lines = [x for x in err.splitlines() if x.strip()]
        assert len(lines) == 1 and "another radspatial eval" in lines[0] and str(out) in lines[0]
        assert other.calls == 0  # the refused run sent nothing
        assert first.poll() is None  # and the first one goes on

        n_done = 0
        for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            if sig == signal.SIGINT:
                first = _spawn(ds, out, server.base_url)
                _wait_for_calls(out, n_done + 2, first)
            first.send_signal(sig)
            _, err = first.communicate(timeout=600)
            assert first.returncode == code, err
            assert "Traceback" not in err and "interrupted" in err
            run = json.loads((out / "run.json").read_text())
            assert run["status"] == "interrupted"
            assert not (out / "results.jsonl").exists()
            n_done = len((out / "calls.jsonl").read_text().splitlines())

        last = _spawn(ds, out, server.base_url)  # the lock died with the killed process
        _, err = last.communicate(timeout=600)
        assert last.returncode == 0, err
    assert json.loads((out / "run.json").read_text())["status"] == "complete"
    n_items = len((ds / "manifest.jsonl").read_text().splitlines())
    assert len((out / "results.jsonl").read_text().splitlines()) == n_items


# --- 4. totalsegmentator cache -----------------------------------------------------------------


def test_totalseg_cache_is_per_user_and_keyed_by_content(tmp_path, monkeypatch) -> None:
    from radspatial.agent.localizers.totalsegmentator.totalseg_localizer import (
        TotalSegLocalizer,
        default_cache_dir,
    )

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    a = tmp_path / "a" / "ct.nii.gz"
    a.parent.mkdir()
    a.write_bytes(b"volume one")
    b = tmp_path / "b.nii.gz"
    shutil.copy(a, b)
    loc = TotalSegLocalizer()
    assert loc.cache_dir == tmp_path / "xdg" / "radspatial" / "totalseg" == default_cache_dir()
    assert loc.cache_path(a) == loc.cache_path(b)  # same content, other path: one entry
    assert loc.cache_path(a).parent == loc.cache_dir
    b.write_bytes(b"volume two")
    os.utime(b, ns=(1, 1))
    assert loc.cache_path(a) != loc.cache_path(b)  # same path, new content: a new entry
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "radspatial" / "totalseg"
