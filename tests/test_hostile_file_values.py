"""Hostile values in files (issue 49, round 5): names and numbers from files (one text gate, one
number gate), silent cases made to speak, and the newest surfaces (``import inspect`` logs,
``probe vlm`` run folders, ``--price``, forged usage in ``calls.jsonl``). Each row as in
tests/hostile.py: the exit code, the words of the one-line message (file and problem), no
traceback, no raw ESC byte, nothing written outside the row's folder. The server's and the
readers' own refusals are checked below the table, on tiny inputs."""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hostile import Base, Case, rewrite_jsonl, run_case, small_run
from synth import canonical_volumes

pytest.importorskip("nrrd")

ESC = "\x1b[31mliver\x1b[0m"
_, LABELS, _ = canonical_volumes()
RAW = LABELS.tobytes(order="F")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    return small_run(tmp_path_factory.mktemp("round5"))


def _nrrd(name: str = "m.nrrd", data: bytes = RAW, **fields: str):
    """The synthetic mask as NRRD (LPS, raw) with ``fields`` overriding the header."""

    def setup(tmp: Path, base: Base) -> list[str]:
        head = {"type": "uint8", "dimension": "3", "space": "left-posterior-superior"}
        head |= {"sizes": "48 40 20", "space directions": "(-4,0,0) (0,-5,0) (0,0,3)"}
        head |= {"kinds": "domain domain domain", "encoding": "raw"}
        head |= {"space origin": "(90,100,-30)", **fields}
        text = "NRRD0004\n" + "".join(f"{k}: {v}\n" for k, v in head.items()) + "\n"
        (tmp / name).write_bytes(text.encode() + data)
        return _generate(tmp, base, tmp / name)

    return setup


def _generate(tmp: Path, base: Base, seg: Path, *more: str) -> list[str]:
    ct = base.ds.parent / "in" / "synth_ct.nii.gz"
    return ["generate", "--ct", str(ct), "--seg", str(seg), "--out", str(tmp / "o"),
            "--setups", "rq1", *more]  # fmt: skip


def _table(names: dict[str, str]):
    def setup(tmp: Path, base: Base) -> list[str]:
        (tmp / "t.json").write_text(json.dumps(names))
        return _generate(tmp, base, base.ds.parent / "in" / "synth_seg.nii.gz", "--labels",
                         str(tmp / "t.json"))  # fmt: skip

    return setup


def _copy(base: Base, tmp: Path) -> tuple[Path, Path]:
    ds, run = tmp / "ds", tmp / "run"
    shutil.copytree(base.ds, ds, symlinks=True)
    shutil.copytree(base.run, run)
    return ds, run


def _eval(ds: Path, out: Path, *more: str) -> list[str]:
    return ["eval", "--data", str(ds), "--model", "baseline:yes", "--runs", "1", "--out",
            str(out), "--limit", "4", *more]  # fmt: skip


def _manifest(**source) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        edit = lambda rows: [{**rows[0], "source": {**rows[0]["source"], **source}}, *rows[1:]]  # noqa: E731
        rewrite_jsonl(ds / "manifest.jsonl", edit)
        return _eval(ds, tmp / "o")

    return setup


def _calls(**fields) -> Case:
    """A resumed eval whose logged first call carries ``fields`` (forged numbers)."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, run = _copy(base, tmp)
        rewrite_jsonl(run / "calls.jsonl", lambda rows: [{**rows[0], **fields}, *rows[1:]])
        return _eval(ds, run)

    return setup


def _calls_bytes(tmp: Path, base: Base) -> list[str]:
    ds, run = _copy(base, tmp)
    lines = (run / "calls.jsonl").read_bytes().split(b"\n")
    lines[0] = lines[0].replace(b'"reply": "', b'"reply": "\xff', 1)
    (run / "calls.jsonl").write_bytes(b"\n".join(lines))
    return _eval(ds, run)


def _price(text: str) -> Case:
    return lambda tmp, base: _eval(base.ds, tmp / "o", "--price", text)


def _results_folder(tmp: Path, base: Base) -> list[str]:
    _, run = _copy(base, tmp)
    (run / "results.jsonl").unlink()
    (run / "results.jsonl").mkdir()
    return ["report", str(run), "--out", str(tmp / "rep")]


def _model_name(command: str, name: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        _, run = _copy(base, tmp)
        metrics = json.loads((run / "metrics.json").read_text())
        (run / "metrics.json").write_text(json.dumps({**metrics, "model": name}))
        return [command, str(run), "--out", str(tmp / "rep")]

    return setup


def _inspect(make) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        log = make(tmp)
        return ["import", "inspect", "--log", str(log), "--data", str(base.ds), "--out",
                str(tmp / "imp")]  # fmt: skip

    return setup


def _fifo_log(tmp: Path) -> Path:
    os.mkfifo(tmp / "x.json")
    return tmp / "x.json"


def _link_log(tmp: Path) -> Path:
    (tmp / "real.json").write_text("{}")
    os.symlink(tmp / "real.json", tmp / "x.json")
    return tmp / "x.json"


def _deep_log(tmp: Path) -> Path:
    (tmp / "x.json").write_text("[" * 200_000 + "]" * 200_000)
    return tmp / "x.json"


def _huge_log(tmp: Path) -> Path:
    (tmp / "x.json").write_text(json.dumps({"samples": ["y" * 1000] * 300}))
    return tmp / "x.json"


def _probe_model(model: str) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        _, run = _copy(base, tmp)
        info = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps({**info, "model": model}))
        return ["probe", "vlm", "--run", str(run), "--out", str(tmp / "p")]

    return setup


def _probe_items(change: str, edit) -> Case:
    """probe vlm on a copy of the run whose ``change`` file (results or manifest) ``edit``
    rewrites: refused before any model is loaded (the model named is never fetched)."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, run = _copy(base, tmp)
        info = json.loads((run / "run.json").read_text())
        (run / "run.json").write_text(json.dumps({**info, "model": "hf:org/m", "data": str(ds)}))
        rewrite_jsonl(
            (run / "results.jsonl") if change == "results" else (ds / "manifest.jsonl"), edit
        )
        return ["probe", "vlm", "--run", str(run), "--out", str(tmp / "p")]

    return setup


def _row(**fields) -> Case:
    """eval on a copy of the dataset whose first manifest row carries ``fields``."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        rewrite_jsonl(ds / "manifest.jsonl", _first(**fields))
        return _eval(ds, tmp / "o")

    return setup


def _qa(**fields) -> Case:
    """eval on the dataset as MIRP's layout (no manifest): its first qa.json entry edited."""

    def setup(tmp: Path, base: Base) -> list[str]:
        ds, _ = _copy(base, tmp)
        (ds / "manifest.jsonl").unlink()
        (ds / "dataset.json").unlink()
        qa = json.loads((ds / "RQ1" / "qa.json").read_text())
        qa[0]["question_answer"][0].update(fields)
        (ds / "RQ1" / "qa.json").write_text(json.dumps(qa))
        return _eval(ds, tmp / "o")

    return setup


LANDMARK = {"structure": "liver", "side": "right", "offset": 0.1, "area": 100, "source": "x"}


def _landmarks(make) -> Case:
    """generate with ``--landmarks`` a table ``make(path)`` writes."""

    def setup(tmp: Path, base: Base) -> list[str]:
        make(tmp / "lm.json")
        return _generate(tmp, base, base.ds.parent / "in" / "synth_seg.nii.gz", "--landmarks",
                         str(tmp / "lm.json"))  # fmt: skip

    return setup


def _table_of(entries: list, **more) -> Callable[[Path], None]:
    return lambda path: path.write_text(json.dumps({"landmarks": entries, **more}))


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _big(path: Path) -> None:
    with path.open("w") as f:  # a valid table padded past the cap (RADSPATIAL_MAX_JSON_MB)
        f.write(json.dumps({"landmarks": [LANDMARK], "pad": "x" * 200_000}))


def _first(**fields):
    return lambda rows: [{**rows[0], **fields}, *rows[1:]]


CASES = [
    # names from files: the text gate
    Case("seg.nrrd name with terminal escapes", _nrrd("m.seg.nrrd", Segment0_Name=ESC,
         Segment0_LabelValue="5"), 2, ("m.seg.nrrd", "Segment0_Name", "control character")),
    Case("seg.nrrd name of 10,000 characters", _nrrd("m.seg.nrrd", Segment0_Name="x" * 10_000,
         Segment0_LabelValue="5"), 2, ("Segment0_Name", "10000 characters long")),
    Case("label table name with escapes", _table({"5": ESC}), 2,
         ("t.json", "label 5's name", "control character")),
    Case("label table name of 10,000 characters", _table({"5": "y" * 10_000}), 2,
         ("t.json", "characters long")),
    # numbers from files: the number gate
    Case("seg.nrrd LabelValue 1e30", _nrrd("m.seg.nrrd", Segment0_Name="liver",
         Segment0_LabelValue="1e30"), 2, ("Segment0_LabelValue", "1..65535")),
    Case("seg.nrrd LabelValue 10^30", _nrrd("m.seg.nrrd", Segment0_Name="liver",
         Segment0_LabelValue="1" + "0" * 30), 2, ("Segment0_LabelValue", "1..65535")),
    Case("nrrd spacing 1e300", _nrrd(**{"space directions": "(-1e300,0,0) (0,-5,0) (0,0,3)"}),
         2, ("m.nrrd", "out of range", "1e+300")),
    Case("nrrd type block", _nrrd(type="block"), 2, ("m.nrrd", "not a number type")),
    Case("manifest slice_index 10^30", _manifest(slice_index=10**30), 2,
         ("manifest.jsonl", "slice_index", "0..1e+06")),
    Case("manifest slice_index true", _manifest(slice_index=True), 2,
         ("manifest.jsonl", "slice_index")),
    Case("calls.jsonl negative tokens", _calls(meta={"usage": {"prompt_tokens": -5}}), 2,
         ("calls.jsonl", "line 1", "prompt_tokens", "forged")),
    Case("calls.jsonl latency 1e308", _calls(latency_s=1e308), 2,
         ("calls.jsonl", "line 1", "latency_s")),
    Case("calls.jsonl latency -1", _calls(latency_s=-1.0), 2, ("calls.jsonl", "latency_s")),
    Case("calls.jsonl non-UTF-8 reply", _calls_bytes, 2, ("calls.jsonl", "line 1", "not UTF-8")),
    # silent cases
    Case("report: results.jsonl is a folder", _results_folder, 2,
         ("results.jsonl", "not a regular file")),
    Case("report: hostile model name", _model_name("report", ESC), 2,
         ("metrics.json", "'model'", "control character")),
    Case("spar-table: hostile model name", _model_name("spar-table", "m" * 5000), 2,
         ("metrics.json", "'model'", "characters long")),
    # import inspect logs
    Case("inspect log a FIFO", _inspect(_fifo_log), 2, ("x.json", "not a regular file")),
    Case("inspect log a symlink", _inspect(_link_log), 2, ("x.json", "not a regular file")),
    Case("inspect log deeply nested", _inspect(_deep_log), 2, ("x.json", "not an inspect log")),
    Case("inspect log over the cap", _inspect(_huge_log), 2, ("x.json", "over the cap"),
         env={"RADSPATIAL_MAX_JSON_MB": "0.1"}),
    # probe vlm: what run.json may name
    Case("probe vlm: run.json model a URL", _probe_model("hf:https://evil.example/m"), 2,
         ("run.json", "is a URL")),
    Case("probe vlm: run.json model /etc", _probe_model("hf:/etc"), 2,
         ("run.json", "not a model folder")),
    Case("probe vlm: run.json model ../..", _probe_model("hf:../../x"), 2,
         ("run.json", "not a model folder")),
    # the decidable field and its reason
    Case("manifest decidable 'yes'", _row(decidable="yes"), 2,
         ("manifest.jsonl", "line 1", "'decidable'")),
    Case("manifest decidable 2", _row(decidable=2), 2, ("manifest.jsonl", "line 1", "'decidable'")),
    Case("manifest decidable_reason of 10,000 characters", _row(decidable_reason="r" * 10_000), 2,
         ("manifest.jsonl", "line 1", "'decidable_reason' is 10000 characters long")),
    Case("manifest decidable_reason with escapes", _row(decidable_reason=ESC), 2,
         ("manifest.jsonl", "'decidable_reason'", "control character")),
    Case("MIRP qa.json decidable 'yes'", _qa(decidable="yes"), 2, ("qa.json", "'decidable' must")),
    Case("MIRP qa.json decidable_reason with escapes", _qa(decidable_reason=ESC), 2,
         ("qa.json", "'decidable_reason'", "control character")),
    # landmark tables (generate --landmarks)
    Case("landmark table a FIFO", _landmarks(_fifo), 2, ("lm.json", "not a regular file")),
    Case("landmark table over the cap", _landmarks(_big), 2, ("lm.json", "over the", "limit"),
         env={"RADSPATIAL_MAX_JSON_MB": "0.1"}),
    Case("landmark table of 10^6 entries", _landmarks(_table_of([{}] * 10**6)), 2,
         ("lm.json", "1000000 entries, at most 1000")),
    Case("landmark offset NaN", _landmarks(lambda p: p.write_text(json.dumps(
         {"landmarks": [{**LANDMARK, "offset": math.nan}]}))), 2,
         ("lm.json", "landmarks[0]", "'offset'", "nan")),
    Case("landmark side unknown", _landmarks(_table_of([{**LANDMARK, "side": "up"}])), 2,
         ("lm.json", "landmarks[0]", "'side' must be 'left' or 'right'")),
    Case("landmark table name with escapes", _landmarks(_table_of([LANDMARK], name=ESC)), 2,
         ("lm.json", "'name'", "control character")),
    Case("landmark source of 10,000 characters", _landmarks(_table_of([{**LANDMARK,
         "source": "s" * 10_000}])), 2, ("lm.json", "'source' is 10000 characters long")),
    # probe vlm: items that disagree with the dataset
    Case("probe vlm: a result id the manifest lacks", _probe_items("results", _first(id="rq9/x")),
         2, ("results.jsonl", "'rq9/x' is not in", "manifest.jsonl", "not of this dataset")),
    Case("probe vlm: a result id naming a path", _probe_items("results",
         _first(id="../../etc/passwd")), 2, ("results.jsonl", "'../../etc/passwd' is not in")),
    Case("probe vlm: a result twice", _probe_items("results", lambda r: [*r, r[0]]), 2,
         ("results.jsonl", "run 0 appears twice")),
    Case("probe vlm: a forged score", _probe_items("results", lambda r: [{**r[0], "correct":
         r[0]["parsed"] != r[0]["expected"]}, *r[1:]]), 2, ("results.jsonl", "(an edited row)")),
    Case("probe vlm: a result of another dataset", _probe_items("results",
         _first(question="Is the aorta above the liver?")), 2,
         ("results.jsonl", "asks another question", "not of this dataset")),
    Case("probe vlm: a manifest id twice", _probe_items("manifest", lambda r: [*r, r[0]]), 2,
         ("manifest.jsonl", "appears twice")),
    Case("probe vlm: a manifest without the run's items", _probe_items("manifest",
         lambda r: [x for x in r if x["setup"] != "rq1"] or r[:1]), 2,
         ("results.jsonl", "is not in", "manifest.jsonl")),
]  # fmt: skip


PRICES = [
    Case("--price negative", _price("input=-1,output=2"), 2, ("--price", "input", "0..10000")),
    Case("--price NaN", _price("input=nan,output=2"), 2, ("--price", "input", "got nan")),
    Case("--price 1e308", _price("input=1,output=1e308"), 2, ("--price", "output", "0..10000")),
    Case("--price with a unit", _price("input=2USD,output=1"), 2, ("not a number", "2USD")),
]  # fmt: skip


@pytest.mark.parametrize("case", PRICES, ids=str)
def test_hostile_prices(case, base, tmp_path, capsys, monkeypatch) -> None:
    """argparse refuses a bad --price itself: exit 2, its usage line and one error line."""
    with pytest.raises(SystemExit) as exc:
        run_case(case, tmp_path, base, capsys, monkeypatch)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and all(w in err for w in case.words), err
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- marker styles on hostile masks

_N = 64  # a 64 px slice, three slices; the CT is air around a soft-tissue square
_II, _JJ = np.meshgrid(np.arange(_N), np.arange(_N), indexing="ij")


def _disk(ci: int, cj: int, r: int) -> np.ndarray:
    return (_II - ci) ** 2 + (_JJ - cj) ** 2 <= r * r


def _two_and(liver: np.ndarray, liver_id: int = 5) -> np.ndarray:
    """A slice holding a spleen (id 1) and a right kidney (id 2), far apart, and ``liver``
    (bool) as ``liver_id``."""
    m = np.zeros((_N, _N), np.uint32)
    m[_disk(12, 12, 6)] = 1
    m[_disk(52, 52, 6)] = 2
    m[liver] = liver_id
    return m


def _pair(liver: np.ndarray, liver_id: int = 5) -> np.ndarray:
    """The spleen and ``liver`` only (every question asks about the two)."""
    m = _two_and(liver, liver_id)
    m[m == 2] = 0
    return m


def _one_pixel() -> np.ndarray:
    one = np.zeros((_N, _N), bool)
    one[30, 34] = True
    return _two_and(one)


def _specks() -> np.ndarray:
    specks = np.zeros((_N, _N), bool)
    specks[22:44:3, 22:44:3] = True  # 64 one-pixel specks between the two
    specks[2:62:4, 34:62:4] = True  # and 105 more along a side
    return _two_and(specks)


def _border() -> np.ndarray:
    m = np.zeros((_N, _N), np.uint32)
    m[_disk(0, 32, 14)] = 5  # cut in half by the top edge
    m[_disk(63, 63, 12)] = 1  # a quarter in the far corner
    return m


def _masks(name: str, slice2d: np.ndarray, *more: str, dtype=np.uint16):
    """``generate`` with the contour, box and point styles on a mask whose every slice is
    ``slice2d`` (``more``: extra options)."""
    import nibabel as nib

    def setup(tmp: Path, base: Base) -> list[str]:
        ct = np.full((_N, _N, 3), -1000, np.int16)
        ct[6:58, 6:58] = 40
        affine = np.diag([3.0, 3.0, 4.0, 1.0])
        nib.save(nib.Nifti1Image(ct, affine), tmp / "ct.nii.gz")
        mask = np.repeat(slice2d[:, :, None], 3, axis=2).astype(dtype)
        nib.save(nib.Nifti1Image(mask, affine), tmp / name)
        (tmp / "t.json").write_text(
            json.dumps({"65535": "liver", "1": "spleen", "2": "kidney_right"})
        )
        return ["generate", "--ct", str(tmp / "ct.nii.gz"), "--seg", str(tmp / name), "--out",
                str(tmp / "o"), "--size", "96", "--as-count", "2", "--min-distance", "20",
                "--markers", "contour,box,point",
                *more]  # fmt: skip

    return setup


def _drawn(names: set[str], skipped: list[int] | None = None):
    """Each marked row's image is in the output, its marker points are inside it and both of
    its colours are drawn; the rows that ask about structures name exactly ``names``; the
    dataset records the ids set to background (``skipped``)."""

    def check(tmp: Path) -> None:
        info = json.loads((tmp / "o" / "dataset.json").read_text())
        assert info["cases"][0]["skipped_label_ids"] == (skipped or [])
        from PIL import Image

        from radspatial.imaging.markers import DOT_COLORS

        rows = [json.loads(x) for x in (tmp / "o" / "manifest.jsonl").read_text().splitlines()]
        asked = {o["name"] for r in rows for o in (r["object1"], r["object2"]) if o["name"]}
        assert asked == names, asked
        for r in rows:
            if r["marker"] == "none":
                continue
            image = np.asarray(Image.open(tmp / "o" / r["image"]).convert("RGB")).astype(int)
            for o in (r["object1"], r["object2"]):
                assert all(0 <= v < 96 for v in o["marker_xy"]), (r["id"], o)
                near = np.abs(image - DOT_COLORS[o["marker_text"]]).max(axis=2) <= 40
                assert near.any(), (r["id"], o["marker_text"])

    return check


RING = _disk(32, 32, 16) & ~_disk(32, 32, 14)
LIVER = _disk(40, 20, 10)
MASKS = [
    Case("a structure of one pixel", _masks("m.nii.gz", _one_pixel()), 0,
         check=_drawn({"spleen", "kidney_right"})),
    Case("structures cut by the border", _masks("m.nii.gz", _border()), 0,
         check=_drawn({"spleen", "liver"})),
    Case("a ring (all hole)", _masks("m.nii.gz", _pair(RING)), 0,
         check=_drawn({"spleen", "liver"})),
    Case("169 specks", _masks("m.nii.gz", _specks()), 0, check=_drawn({"spleen", "kidney_right"})),
    Case("one label over the whole slice", _masks("m.nii.gz", np.full((_N, _N), 5)), 0,
         check=_drawn(set())),
    Case("id 65535 no table names", _masks("m.nii.gz", _two_and(LIVER, 65535)), 0,
         check=_drawn({"spleen", "kidney_right"}, [65535])),
    Case("id 65535 a table names", _masks("m.nii.gz", _pair(LIVER, 65535), "--labels",
         "t.json"), 0, check=_drawn({"spleen", "liver"})),
    Case("id 65535 and the letters marker", _masks("m.nii.gz", _two_and(LIVER, 65535),
         "--labels", "t.json", "--markers", "letters"), 2,
         ("m.nii.gz", "letters marker cannot mark label id 65535", "1..676")),
    Case("id 131070 in a 32-bit mask", _masks("m.nii.gz", _two_and(LIVER, 131070),
         dtype=np.uint32), 2, ("m.nii.gz", "mask has label 131070 > 65535")),
]  # fmt: skip


@pytest.mark.parametrize("case", MASKS, ids=str)
def test_marker_styles_on_hostile_masks(case, tmp_path, capsys, monkeypatch) -> None:
    """contour, box and point on masks no CT gives: each generates (every mark drawn inside
    the image) or is refused in one line naming the mask; nothing outside its folder."""
    monkeypatch.chdir(tmp_path)
    before = {p.name for p in tmp_path.parent.iterdir()}
    run_case(case, tmp_path, Base(tmp_path, tmp_path), capsys, monkeypatch)
    _nothing_outside(tmp_path, before)


def _nothing_outside(tmp: Path, before: set[str]) -> None:
    """The row wrote nothing in the folder around its own."""
    assert {p.name for p in tmp.parent.iterdir()} <= before | {tmp.name}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hostile_file_values(case, base, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = {p.name for p in tmp_path.parent.iterdir()}
    text = run_case(case, tmp_path, base, capsys, monkeypatch)
    assert "\x1b" not in text
    _nothing_outside(tmp_path, before)


# ---------------------------------------------------------------- the server's request hygiene

_REFUSED = [
    ({"stream_options": {"include_usage": "yes"}}, "stream_options.include_usage"),
    ({"stream_options": "yes"}, "'stream_options' must be an object"),
    ({"stream_options": {"continuous_usage_stats": True}}, "cannot be honoured"),
    ({"tool_choice": "required"}, "'tool_choice'"),
    ({"tool_choice": {"type": "function", "function": {"name": "f"}}}, "'tool_choice'"),
    ({"logprobs": True}, "'logprobs'"),
    ({"top_logprobs": 3}, "'top_logprobs'"),
]


@pytest.mark.parametrize("extra, words", _REFUSED, ids=[str(r[0]) for r in _REFUSED])
def test_the_server_refuses_what_it_cannot_honour(extra, words):
    from radspatial.agent.server.chat_format import ApiError, check_sampling

    with pytest.raises(ApiError) as err:
        check_sampling(extra)
    assert err.value.status == 400 and words in err.value.message


def test_the_server_still_takes_what_it_can_honour():
    from radspatial.agent.server.chat_format import check_sampling

    for extra in ({"stream_options": {"include_usage": True}}, {"tool_choice": "none"},
                  {"logprobs": False}, {"tool_choice": "auto"}):  # fmt: skip
        check_sampling(extra)


def test_two_authorization_headers_are_refused():
    import socket

    from radspatial.agent.server.server import build_agents, make_server

    agents = build_agents(("markers",))
    with make_server(agents=agents, default_model="agent:markers", api_key="k") as srv:
        port = srv.server_address[1]
        for auth in (b"Authorization: Bearer k\r\nAuthorization: Bearer x\r\n",
                     b"Authorization: Bearer k\r\n"):  # fmt: skip
            request = (
                b"GET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + b"Connection: close\r\n\r\n"
            )
            with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                s.sendall(request)
                reply = b""
                while chunk := s.recv(65536):  # the server closes (Connection: close)
                    reply += chunk
            status = int(reply.split(b" ", 2)[1])
            assert status == (400 if auth.count(b"Authorization") == 2 else 200), reply[:300]
            if status == 400:
                assert b"several Authorization headers" in reply


# ---------------------------------------------------------------- replies, masks, models


@pytest.mark.parametrize("content", [{"answer": 1}, True, [{"type": "text", "text": 5}]])
def test_a_reply_whose_content_is_not_text_is_an_error_not_its_str(content):
    from radspatial.models.openai_client import parse_completion

    with pytest.raises(ValueError, match=r"choices\[0\]\.message\.content"):
        parse_completion({"choices": [{"message": {"content": content}}]})
    assert parse_completion({"choices": [{"message": {"content": 1}}]})[0] == "1"


DCMQI = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dcmqi_ct3"
needs_dcmqi = pytest.mark.skipif(not DCMQI.is_dir(), reason="../shared/data not present")


def _seg(tmp: Path, change) -> Path:
    pydicom = pytest.importorskip("pydicom")
    ds = pydicom.dcmread(DCMQI / "liver.dcm")
    with pydicom.config.disable_value_validation():
        change(ds)
        ds.save_as(tmp / "m.dcm", enforce_file_format=True)
    return tmp / "m.dcm"


@needs_dcmqi
def test_seg_labelmap_type_on_a_binary_seg_and_an_escaped_label_are_refused(tmp_path):
    from radspatial.imaging.dicom_seg import read_dicom_seg, segment_names
    from radspatial.imaging.volumes import InputError

    path = _seg(tmp_path, lambda ds: setattr(ds, "SegmentationType", "LABELMAP"))
    with pytest.raises(InputError, match=r"m\.dcm: DICOM SEG SegmentationType 'LABELMAP'"):
        read_dicom_seg(path)
    path = _seg(tmp_path, lambda ds: setattr(ds.SegmentSequence[0], "SegmentLabel", ESC))
    with pytest.raises(InputError, match=r"m\.dcm: segment 1's SegmentLabel holds the control"):
        segment_names(path)


@needs_dcmqi
def test_seg_without_series_is_used_with_a_word(tmp_path, caplog):
    from radspatial.imaging.volumes import Case as VCase
    from radspatial.imaging.volumes import load_case

    path = _seg(tmp_path, lambda ds: delattr(ds, "ReferencedSeriesSequence"))
    load_case(VCase("d", DCMQI / "ct-3slice", path))
    assert "m.dcm: DICOM SEG has no ReferencedSeriesSequence" in caplog.text


@needs_dcmqi
def test_junk_and_a_symlink_loop_in_a_dicom_folder_are_counted_in_one_line(tmp_path):
    from radspatial.imaging.dicom import read_dicom_series

    folder = tmp_path / "ct"
    shutil.copytree(DCMQI / "ct-3slice", folder)
    for k in range(5):
        (folder / f"junk{k}.txt").write_text("not dicom")
    os.symlink(folder / "loop", folder / "loop")
    (folder / "sub").mkdir()
    said: list[str] = []
    volume, _ = read_dicom_series(folder, said.append)
    assert volume.shape[2] == 3 and len(said) == 1, said
    assert "skipped 7 entries" in said[0] and "5 not DICOM" in said[0]
    assert "2 not a regular file" in said[0]


def test_unet_training_refuses_a_mask_id_no_table_names(base, tmp_path):
    from PIL import Image

    from radspatial.training.unet_train import TrainConfig, train_unet

    ds = tmp_path / "ds"
    shutil.copytree(base.ds, ds)
    mask = sorted((ds / "masks").glob("*.png"))[0]
    arr = np.array(Image.open(mask)).astype(np.uint16)
    arr[0, 0] = 65535
    Image.fromarray(arr).save(mask)
    with pytest.raises(ValueError, match=r"\.png: label id\(s\) 65535 have no name"):
        train_unet(ds, tmp_path / "model", TrainConfig(epochs=1, val_fraction=0.0), progress=False)
    assert not (tmp_path / "model").exists()


@pytest.mark.parametrize(
    "change, words",
    [({"format": "x"}, "format is 'x'"), ({"slices": 3}, "slices is 3"),
     ({"npz_sha256": "0" * 64}, "npz_sha256 is not"), ({"size": "64"}, "size is '64'")],
)  # fmt: skip
def test_a_malformed_atlas_json_beside_a_model_is_refused(tmp_path, change, words):
    from radspatial.agent.localizers.organs.organs import shipped_model_dir
    from radspatial.agent.localizers.organs.organs_atlas import load_atlas

    for name in ("atlas.npz", "atlas.json"):
        shutil.copy(shipped_model_dir() / name, tmp_path / name)
    meta = json.loads((tmp_path / "atlas.json").read_text())
    (tmp_path / "atlas.json").write_text(json.dumps({**meta, **change}))
    with pytest.raises(ValueError, match=r"atlas\.json: ") as err:
        load_atlas.__wrapped__(str(tmp_path))
    assert words in str(err.value)


@pytest.mark.parametrize("kind", ["contour", "box", "point"])
def test_a_mark_on_a_region_with_no_pixel_is_still_drawn(kind):
    """A region that vanished at the output size draws the blank page's shape, never nothing;
    a one-pixel region in a corner and a whole-image region draw inside the image."""
    from radspatial.imaging.markers import Mark, draw_marks

    empty, corner, whole = (
        np.zeros((32, 32), bool),
        np.zeros((32, 32), bool),
        np.ones((32, 32), bool),
    )
    corner[0, 31] = True
    for region in (empty, corner, whole):
        image = draw_marks(
            np.zeros((32, 32, 3), np.uint8), [Mark(kind, "red", (31.0, 0.0), region)]
        )
        assert (image[:, :, 0] > 200).any(), (kind, int(region.sum()))


def test_a_landmark_reason_always_passes_the_readers_gate():
    """Many long landmark names in one slice: the reason names the first and counts the rest,
    within the length the manifest reader takes."""
    from radspatial.core.datafiles import check_reason
    from radspatial.core.textsafe import MAX_PROSE_CHARS
    from radspatial.questions.decidability import landmark_reason

    assert landmark_reason(["liver", "spleen"]) == "landmark: liver, spleen"
    names = [f"structure_{k}_" + "x" * 50 for k in range(40)]
    reason = landmark_reason(names)
    assert len(reason) <= MAX_PROSE_CHARS and reason.endswith(" more)") and names[0] in reason
    check_reason(reason, "m.jsonl: line 1")


# ---------------------------------------------------------------- forged inspect logs


@pytest.fixture(scope="module")
def inspect_log(base, tmp_path_factory) -> Path:
    """A real inspect log of ``radspatial/bench`` on the base dataset (20 items), run in-process
    by inspect's ``eval()`` against a fake OpenAI-compatible server answering "1"."""
    pytest.importorskip("inspect_ai")
    from fake_server import FakeChatServer
    from inspect_ai import eval as inspect_eval

    out = tmp_path_factory.mktemp("inspect_logs")
    with FakeChatServer(answer=lambda body: "1") as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOCAL_BASE_URL", server.base_url)
        mp.setenv("LOCAL_API_KEY", "unused")
        args = {"task_args": {"data": str(base.ds)}, "log_dir": str(out), "display": "none"}
        # a model name of its own: inspect keeps a model per name, bound to this server
        (log,) = inspect_eval("radspatial/bench", model="openai-api/local/forge", **args)
    assert log.status == "success" and len(log.samples) == 20
    return Path(log.location)


def _same_prompt_pair(log) -> tuple[int, int]:
    """Two samples whose prompts are the same text (on different images)."""
    from radspatial.formats.inspect_import import _prompt_text

    seen: dict[str, int] = {}
    for k, s in enumerate(log.samples):
        if (text := _prompt_text(s)) in seen:
            return seen[text], k
        seen[text] = k
    raise AssertionError("no two samples share a prompt")


def _forge_score(log) -> None:
    for s in log.samples:  # every sample scored right, and the log's totals with them
        s.scores["frames"].value = {**s.scores["frames"].value, "image": 1.0}
    for score in log.results.scores:
        for metric in score.metrics.values():
            metric.value = 1.0


def _forge_path_id(log) -> None:
    log.samples[0].id = "../../../etc/passwd"


def _forge_other_item(log) -> None:
    a, b = _same_prompt_pair(log)
    log.samples[a].id = log.samples[b].id
    del log.samples[b]


def _forge_twice(log) -> None:
    log.samples.append(log.samples[0])


def _forge_image(log) -> None:
    a, b = _same_prompt_pair(log)
    sa, sb = log.samples[a], log.samples[b]
    key_a = str(sa.input[0].content[1].image).removeprefix("attachment://")
    key_b = str(sb.input[0].content[1].image).removeprefix("attachment://")
    sa.attachments[key_a] = sb.attachments[key_b]


FORGED = [
    ("a sample id naming a path", _forge_path_id, ("'../../../etc/passwd' is not an item of",)),
    ("a sample id naming another item", _forge_other_item, ("its image is not the item's",)),
    ("a sample logged twice", _forge_twice, ("is logged twice in one log",)),
    ("another item's image", _forge_image, ("its image is not the item's",)),
]


@pytest.mark.parametrize("name, forge, words", FORGED, ids=[f[0] for f in FORGED])
def test_a_forged_inspect_log_is_refused(name, forge, words, inspect_log, base, tmp_path, capsys):
    from inspect_ai.log import read_eval_log, write_eval_log

    from radspatial.cli import main

    log = read_eval_log(str(inspect_log))
    forge(log)
    write_eval_log(log, str(tmp_path / "x.json"))  # inspect's JSON format keeps a repeat
    argv = ["import", "inspect", "--log", str(tmp_path / "x.json"), "--data", str(base.ds)]
    assert main([*argv, "--out", str(tmp_path / "imp")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "x.json: sample" in err, err
    assert all(w in err for w in words) and "Traceback" not in err, err
    assert not (tmp_path / "imp").exists()


def test_a_forged_inspect_score_is_scored_again(inspect_log, base, tmp_path):
    """The log's scores are not read: the replies are scored again, to the clean log's rows."""
    from inspect_ai.log import read_eval_log, write_eval_log

    from radspatial.cli import main
    from radspatial.core.io import read_jsonl

    log = read_eval_log(str(inspect_log))
    _forge_score(log)
    write_eval_log(log, str(tmp_path / "forged.eval"))
    rows = {}
    for name, path in (("clean", inspect_log), ("forged", tmp_path / "forged.eval")):
        argv = ["import", "inspect", "--log", str(path), "--data", str(base.ds)]
        assert main([*argv, "--out", str(tmp_path / name)]) == 0
        rows[name] = read_jsonl(tmp_path / name / "results.jsonl")
    assert rows["forged"] == rows["clean"] and len(rows["clean"]) == 20
    assert 0 < sum(r["correct"] for r in rows["forged"]) < 20  # "1" to every item: some wrong
    metrics = json.loads((tmp_path / "forged" / "metrics.json").read_text())
    assert metrics["overall"]["accuracy_mean"] < 1.0
