"""Hostile and careless inputs to eval, report and export (issue 24): one table row per case,
the command as typed, its exit code and the words its one-line message must hold. Real files,
real processes' folders, real HTTP servers on 127.0.0.1 (tests/hostile.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from fake_server import FakeChatServer
from hostile import Base, Case, RawServer, completion, rewrite_jsonl, run_case, small_run

from radspatial.cli import main

SECRET = "S3CRETpw"
URLS: dict[str, str] = {}  # server name -> base URL, filled by the module fixture


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    tmp = tmp_path_factory.mktemp("hostile")
    return small_run(tmp)


@pytest.fixture(scope="module")
def servers():
    deep = b'{"choices": [{"message": {"content": ' + b"[" * 200_000 + b"]" * 200_000 + b"}}]}"
    raw = {
        "surrogate": RawServer(b'{"choices": [{"message": {"content": "yes \\ud800"}}]}'),
        "deep": RawServer(deep),
        "big": RawServer(completion("y" * (3 * 2**20))),
        "bomb": RawServer(completion("0" * (40 * 2**20)), gzipped=True),
        "drip": RawServer(completion("yes"), drip_s=0.2),
        "int": RawServer(completion(12345)),
    }
    fake = FakeChatServer()
    with fake:
        for name, server in raw.items():
            server.__enter__()
            URLS[name] = server.url
        URLS["fake"] = fake.base_url
        yield
        for server in raw.values():
            server.__exit__()


def _copy(base: Base, tmp: Path) -> tuple[Path, Path]:
    ds, run = tmp / "ds", tmp / "run"
    shutil.copytree(base.ds, ds, symlinks=True)
    shutil.copytree(base.run, run)
    return ds, run


def _eval(ds: Path, out: Path, model: str, *more: str) -> list[str]:
    return ["eval", "--data", str(ds), "--model", model, "--runs", "1", "--out", str(out),
            "--limit", "1", *more]  # fmt: skip


def _remote(name: str, *more: str) -> Case:
    """An eval of one call against the raw server ``name``."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        opts = ("--retries", "0", "--timeout", "2", *more)
        return _eval(ds, tmp / "out", f"openai-compat:m@{URLS[name]}", *opts)

    return setup


def _results_row(**change) -> Case:
    """export mirp of the run with the first results row changed."""

    def setup(tmp: Path, base: Base) -> list[str]:
        _, run = _copy(base, tmp)
        rewrite_jsonl(run / "results.jsonl", lambda rows: [{**rows[0], **change}, *rows[1:]])
        return ["export", "mirp", "--run", str(run), "--out", str(tmp / "exp" / "a" / "b")]

    return setup


def _nothing_outside(tmp: Path) -> None:
    assert not (tmp / "OUTSIDE").exists() and not (tmp / "outside").exists()
    assert not (tmp / "exp").exists() or not any((tmp / "exp").rglob("*.json"))


def _symlinked(name: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        ds, run = _copy(base, tmp)
        (tmp / "victim.txt").write_text("keep me\n")
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(tmp / "victim.txt")
        return _eval(ds, run, "baseline:yes", "--limit", "4")

    return setup


def _victim_intact(tmp: Path) -> None:
    assert (tmp / "victim.txt").read_text() == "keep me\n"


def _labels_abs(tmp: Path, base: Base) -> list[str]:
    ds, _ = _copy(base, tmp)
    (tmp / "secret.json").write_text('{"1": "topsecret_organ"}')
    info = json.loads((ds / "dataset.json").read_text())
    info["cases"][0]["labels"] = str(tmp / "secret.json")
    (ds / "dataset.json").write_text(json.dumps(info))
    return _eval(ds, tmp / "out", "agent:mask")


def _secret_url(tmp: Path, base: Base) -> list[str]:
    ds, _ = _copy(base, tmp)
    url = URLS["fake"].replace("http://", f"http://user:{SECRET}@")
    return _eval(ds, tmp / "out", f"openai-compat:m@{url}")


def _no_secret(tmp: Path) -> None:
    for path in (tmp / "out").rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path


def _report_label(tmp: Path, base: Base) -> list[str]:
    _, run = _copy(base, tmp)
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["model"] = "x ![t](http://evil.invalid/x.png) | a | b |"  # a newline: refused
    (run / "metrics.json").write_text(json.dumps(metrics))
    rewrite_jsonl(run / "results.jsonl", lambda rows: [{**rows[0], "image": "/etc/passwd"}])
    return ["report", str(run), "--out", str(tmp / "rep")]


def _report_safe(tmp: Path) -> None:
    html = (tmp / "rep" / "index.html").read_text()
    md = (tmp / "rep" / "summary.md").read_text()
    assert 'evil.invalid/x.png"' not in html and '<img class="fig" src="http' not in html
    assert '/etc/passwd"' not in html and "etc/passwd" not in html.split("image not found")[0]
    assert not any(line.startswith("![t]") for line in md.splitlines())


def _export_onto(kind: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        ds, run = _copy(base, tmp)
        if kind == "hf":
            return ["export", "hf", "--data", str(ds), "--out", str(ds), "--overwrite"]
        return ["export", "mirp", "--run", str(run), "--out", str(run), "--overwrite"]

    return setup


def _sources_intact(tmp: Path) -> None:
    assert (tmp / "ds" / "manifest.jsonl").is_file() and (tmp / "run" / "results.jsonl").is_file()
    assert (tmp / "run" / "calls.jsonl").is_file() and (tmp / "run" / "metrics.json").is_file()


def _dup_question(tmp: Path, base: Base) -> list[str]:
    ds, _ = _copy(base, tmp)
    twice = lambda rows: [*rows, {**rows[0], "id": rows[0]["id"] + "b"}]  # noqa: E731
    rewrite_jsonl(ds / "manifest.jsonl", twice)
    return _eval(ds, tmp / "out", "baseline:yes", "--limit", "1000")


def _both_answered(tmp: Path) -> None:
    rows = [json.loads(x) for x in (tmp / "out" / "results.jsonl").read_text().splitlines()]
    assert rows and all(r["reply"] is not None and r["error"] is None for r in rows)


def _other_cwd(tmp: Path, base: Base) -> list[str]:
    ds, _ = _copy(base, tmp)
    (tmp / "sub").mkdir()
    os.chdir(tmp / "sub")
    assert main(_eval(Path("../ds"), Path("run"), "baseline:yes", "--limit", "2")) == 0
    os.chdir(tmp)
    return ["report", "sub/run", "--out", "rep"]


def _images_found(tmp: Path) -> None:
    html = (tmp / "rep" / "index.html").read_text()
    assert "image not found" not in html and '<img loading="lazy"' in html


def _file(name: str, content: bytes | str, cmd: str = "eval") -> Case:
    """``name`` in the dataset (or run) replaced by ``content``; then the command."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, run = _copy(base, tmp)
        root = run if cmd in ("report", "mirp") else ds
        path = root / name
        path.unlink(missing_ok=True)
        if content == "/dev/zero":
            path.symlink_to("/dev/zero")
        else:
            path.write_bytes(content.encode() if isinstance(content, str) else content)
        if cmd == "report":
            return ["report", str(run), "--out", str(tmp / "rep")]
        if cmd == "mirp":
            return ["export", "mirp", "--run", str(run), "--out", str(tmp / "exp")]
        if cmd == "hf":
            return ["export", "hf", "--data", str(ds), "--out", str(tmp / "hf")]
        return _eval(ds, tmp / "out", "baseline:yes")

    return setup


def _manifest_row(**change) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        rewrite_jsonl(ds / "manifest.jsonl", lambda rows: [{**rows[0], **change}, *rows[1:]])
        return _eval(ds, tmp / "out", "baseline:yes", "--limit", "1000")

    return setup


def _gif_png(tmp: Path, base: Base) -> list[str]:
    ds, _ = _copy(base, tmp)
    first = json.loads((ds / "manifest.jsonl").read_text().splitlines()[0])
    (ds / first["image"]).write_bytes(b"GIF89a" + b"\0" * 64)
    return _eval(ds, tmp / "out", "baseline:yes", "--limit", "1000")


def _review(tmp: Path, base: Base) -> list[str]:
    _, run = _copy(base, tmp)
    shutil.copytree(run, tmp / "run2")
    first = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    marks = [{"id": first["id"], "mark": "correct"}, {"id": "no/such/item", "mark": "correct"}]
    (tmp / "marks.jsonl").write_text("".join(json.dumps(m) + "\n" for m in marks))
    return ["report", str(run), str(tmp / "run2"), "--out", str(tmp / "rep"),
            "--review", str(tmp / "marks.jsonl")]  # fmt: skip


def _one_unmatched(tmp: Path) -> None:
    assert json.loads((tmp / "rep" / "review.json").read_text())["unmatched"] == 1


def _hf(*more: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        return ["export", "hf", "--data", str(ds), "--out", str(tmp / "hf"), *more]

    return setup


def _calls_reply_int(tmp: Path, base: Base) -> list[str]:
    ds, run = _copy(base, tmp)
    rewrite_jsonl(run / "calls.jsonl", lambda rows: [{**rows[0], "reply": 7}, *rows[1:]])
    return _eval(ds, run, "baseline:yes", "--limit", "4")


def _probe_table_list(tmp: Path, base: Base) -> list[str]:
    (tmp / "p").mkdir()
    (tmp / "p" / "results.json").write_text("[1, 2]")
    return ["probe", "table", str(tmp / "p"), "--out", str(tmp / "t")]


def _mirp_linked(tmp: Path, base: Base) -> list[str]:
    """A MIRP layout whose RQ3 images are symlinks to RQ1's copies (inside the dataset)."""
    ds, _ = _copy(base, tmp)
    (ds / "manifest.jsonl").unlink()
    (ds / "dataset.json").unlink()
    (ds / "RQ3" / "images").mkdir(parents=True)
    shutil.copy(ds / "RQ1" / "qa.json", ds / "RQ3" / "qa.json")
    for png in (ds / "RQ1" / "images").iterdir():
        (ds / "RQ3" / "images" / png.name).symlink_to(Path("../../RQ1/images") / png.name)
    return _eval(ds, tmp / "out", "baseline:yes", "--limit", "1000")


def _rq3_read(tmp: Path) -> None:
    rows = [json.loads(x) for x in (tmp / "out" / "results.jsonl").read_text().splitlines()]
    assert {r["setup"] for r in rows} == {"rq1", "rq3"}


def _nan_centres(tmp: Path, base: Base) -> list[str]:
    ds, _ = _copy(base, tmp)
    path = next(ds.glob("center_of_*.json"))
    entries = json.loads(path.read_text())
    entries[0]["label_info"][0]["center_x"] = float("nan")
    path.write_text(json.dumps(entries))
    return _eval(ds, tmp / "out", "baseline:yes")


def _no_manifest(empty: bool) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        (ds / "manifest.jsonl").write_text("") if empty else (ds / "manifest.jsonl").unlink()
        return _eval(ds, tmp / "out", "baseline:yes")

    return setup


DEEP = "[" * 100_000 + "]" * 100_000

CASES = [
    # security: paths from a run folder stay inside --out; no symlinks followed
    Case("mirp marker traversal", _results_row(marker="x/../../OUTSIDE/pwn"), 2,
         ("results.jsonl", "'marker' must be a plain name"), _nothing_outside),
    Case("mirp setup traversal", _results_row(setup="../outside"), 2,
         ("results.jsonl", "'setup' must be a plain name"), _nothing_outside),
    Case("symlinked .lock", _symlinked(".lock"), 2, (".lock", "symlink"), _victim_intact),
    Case("symlinked calls.jsonl", _symlinked("calls.jsonl"), 2, ("calls.jsonl", "symlink"),
         _victim_intact),
    Case("dataset.json labels absolute", _labels_abs, 2, ("dataset.json", "labels", "absolute")),
    Case("password in base URL", _secret_url, 0, (), _no_secret),
    Case("report label and image injection", _report_label, 0, (), _report_safe),
    # data loss
    Case("export hf onto its dataset", _export_onto("hf"), 2, ("--out", "is the input --data"),
         _sources_intact),
    Case("export mirp onto its run", _export_onto("mirp"), 2, ("--out", "is the input --run"),
         _sources_intact),
    Case("reply with a lone surrogate", _remote("surrogate"), 0),
    Case("reply nested 200k deep", _remote("deep"), 3, ("failed",)),
    Case("calls.jsonl reply an integer", _calls_reply_int, 2, ("calls.jsonl", "line 1")),
    # wrong results and hangs
    Case("duplicate question on one image", _dup_question, 0, (), _both_answered),
    Case("paths from another working folder", _other_cwd, 0, (), _images_found),
    Case("review mark matching two runs", _review, 0, (), _one_unmatched),
    Case("timeout is per call", _remote("drip", "--timeout", "1"), 3, ("failed",)),
    Case("concurrency 1e7", lambda t, b: _eval(b.ds, t / "o", "baseline:yes", "--concurrency",
         "10000000"), 2, ("--concurrency", "4096")),  # fmt: skip
    Case("reply over the size cap", _remote("big", "--model-args", "max_reply_mb=1"), 3),
    Case("gzip bomb reply", _remote("bomb", "--model-args", "max_reply_mb=1"), 3),
    Case("reply a JSON number (read as its text)", _remote("int"), 0),
    Case("dataset.json is /dev/zero", _file("dataset.json", "/dev/zero"), 2,
         ("dataset.json", "not a regular file")),
    Case("metrics.json is /dev/zero", _file("metrics.json", "/dev/zero", "report"), 2,
         ("metrics.json", "not a regular file")),
    Case("manifest line over the cap", _manifest_row(question="q" * 300_000), 2,
         ("manifest.jsonl", "line 1", "line limit"), env={"RADSPATIAL_MAX_LINE_MB": "0.1"}),
    # tracebacks and unclear messages
    Case("5000-digit integer", _file("dataset.json", '{"n": ' + "9" * 5000 + "}"), 2,
         ("dataset.json", "not valid JSON")),
    Case("non-UTF-8 manifest", _file("manifest.jsonl", b"\xff\xfe{}\n"), 2,
         ("manifest.jsonl", "not UTF-8")),
    Case("id with ESC", _manifest_row(id="rq1/none/\x1b[31mx"), 2, ("manifest.jsonl", "control")),
    Case("id with U+202E", _manifest_row(id="rq1/none/\u202ex"), 2, ("manifest.jsonl", "control")),
    Case("unknown setup rq9", _manifest_row(setup="rq9"), 2, ("manifest.jsonl", "unknown setup")),
    Case("centre 1e30", _manifest_row(object1={"name": "liver", "center_xy": [1e30, 3.0]}), 2,
         ("manifest.jsonl", "'center_xy' must be finite")),
    Case("GIF named .png", _gif_png, 2, (".png", "not a PNG")),
    Case("metrics.json a list", _file("metrics.json", "[1]", "report"), 2,
         ("metrics.json", "expected an object")),
    Case("metrics overall a number", _file("metrics.json", '{"overall": 3}', "report"), 2,
         ("metrics.json", "'overall' must be an object")),
    Case("metrics deep nesting", _file("metrics.json", DEEP, "report"), 2,
         ("metrics.json", "nested too deeply")),
    Case("run.json a list", _file("run.json", "[]", "report"), 2,
         ("run.json", "expected an object")),
    Case("results lines numbers", _file("results.jsonl", "1\n2\n", "report"), 2,
         ("results.jsonl", "line 1", "JSON object")),
    Case("results lines strings", _file("results.jsonl", '"a"\n', "mirp"), 2,
         ("results.jsonl", "JSON object")),
    Case("mirp run.json wrong type", _file("run.json", '"x"', "mirp"), 2,
         ("run.json", "expected an object")),
    Case("mirp run number a string", _results_row(run="x"), 2, ("results.jsonl", "'run'")),
    Case("hf shard size inf", _hf("--max-shard-mb", "inf"), 2, ("--max-shard-mb", "finite")),
    Case("hf licence injects YAML", _hf("--license", "mit\nx: y"), 2, ("--license", "licence id")),
    Case("hf dataset.json cases a number", _file("dataset.json", '{"cases": 3}', "hf"), 2,
         ("dataset.json", "'cases'")),
    Case("MIRP RQ3 images linking to RQ1's", _mirp_linked, 0, (), _rq3_read),
    Case("NaN centre", _nan_centres, 2, ("center_of_", "not a finite number")),
    Case("empty manifest", _no_manifest(True), 2, ("manifest.jsonl", "no rows")),
    Case("manifest missing", _no_manifest(False), 2, ("manifest.jsonl", "missing")),
    Case("probe table on a list", _probe_table_list, 2, ("results.json", "expected an object")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hostile_run_inputs(case, base, servers, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run_case(case, tmp_path, base, capsys, monkeypatch)
