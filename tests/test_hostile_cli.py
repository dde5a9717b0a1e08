"""Careless inputs to generate and probe build (issue 24): label tables whose ids or names
would silently mean something else, split fractions that cannot be. One row per case: the file,
the command as typed, exit 2 and the words of the one-line message (tests/hostile.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile import Base, Case, run_case
from synth import write_case


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Base:
    tmp = tmp_path_factory.mktemp("hostile_cli")
    write_case(tmp / "in")
    return Base(tmp / "in", tmp / "in")


def _labels(table: str | bytes) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        (tmp / "t.json").write_bytes(table if isinstance(table, bytes) else table.encode())
        ct, seg = base.ds / "synth_ct.nii.gz", base.ds / "synth_seg.nii.gz"
        return ["generate", "--ct", str(ct), "--seg", str(seg), "--labels", str(tmp / "t.json"),
                "--out", str(tmp / "o"), "--setups", "rq1"]  # fmt: skip

    return setup


def _png(path: Path, size: int = 64) -> Path:
    from PIL import Image

    Image.new("RGB", (size, size), (0, 0, 0)).save(path)
    return path


def _agent(image: bytes | None = None, *more: str, mask: bytes | None = None) -> Case:
    """``radspatial agent`` on a black PNG (or ``image`` bytes), with ``more`` flags."""

    def setup(tmp: Path, base: Base) -> list[str]:
        img = _png(tmp / "a.png")
        if image is not None:
            img.write_bytes(image)
        argv = ["agent", "--image", str(img), "--question", "Is 1 left of 2?", *more]
        if mask is not None:
            (tmp / "m.png").write_bytes(mask)
            argv += ["--mask", str(tmp / "m.png"), "--localizer", "mask"]
        return [a.replace("TMP", str(tmp)) for a in argv]

    return setup


def _unet_dir(tmp: Path, base: Base) -> list[str]:
    (tmp / "u").mkdir()
    (tmp / "u" / "config.json").write_text("{garbage")
    (tmp / "u" / "model.safetensors").write_bytes(b"x")
    return _agent(None, "--localizer", "unet", "--model", str(tmp / "u"))(tmp, base)


def _fifo_ct(tmp: Path, base: Base) -> list[str]:
    import os

    os.mkfifo(tmp / "ct.nii.gz")
    (tmp / "cases.csv").write_text(f"ct,seg\n{tmp / 'ct.nii.gz'},{base.ds / 'synth_seg.nii.gz'}\n")
    return ["generate", "--cases", str(tmp / "cases.csv"), "--out", str(tmp / "o")]


def _prompt(content: bytes | None) -> Case:
    def setup(tmp: Path, base: Base) -> list[str]:
        import os

        os.mkfifo(tmp / "p.txt") if content is None else (tmp / "p.txt").write_bytes(content)
        return ["eval", "--data", str(tmp), "--model", "baseline:yes", "--out", str(tmp / "r"),
                "--prompt", str(tmp / "p.txt")]  # fmt: skip

    return setup


def _splits(text: str) -> Case:
    return lambda tmp, base: ["probe", "build", "--out", str(tmp / "p"), "--splits", text]


def _phantom_into_data(tmp: Path, base: Base) -> list[str]:
    (tmp / "o").mkdir()
    (tmp / "o" / "notes.txt").write_text("mine")
    return ["phantom", "--out", str(tmp / "o"), "--n", "1", "--shape", "32,32,8"]


def _data_intact(tmp: Path) -> None:
    assert [p.name for p in (tmp / "o").iterdir()] == ["notes.txt"]


_PNG_HEAD = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00@\x00\x00\x00@\x08\x02"

CASES = [
    Case("label name ---", _labels('{"1": "---"}'), 2, ("t.json", "label 1 has no name")),
    Case("label id fullwidth digits", _labels('{"\uff11": "spleen"}'), 2,
         ("t.json", "not an integer")),
    Case("label ids 1 and 01", _labels('{"1": "spleen", "01": "liver"}'), 2,
         ("t.json", "given twice")),
    Case("label named left", _labels('{"1": "left", "2": "liver"}'), 2,
         ("t.json", "named only 'left'")),
    Case("label id with spaces", _labels('{" 1": "spleen"}'), 2, ("t.json", "not an integer")),
    Case("label table not UTF-8", _labels(b'{"1": "sp\xe9"}'), 2, ("t.json", "not UTF-8")),
    Case("label table nested deep", _labels("[" * 100_000 + "]" * 100_000), 2,
         ("t.json", "nested too deeply")),
    Case("agent truncated PNG", _agent(_PNG_HEAD), 2, ("a.png", "image")),
    Case("agent mask not an image", _agent(None, mask=b"not a png"), 2, ("m.png", "mask")),
    Case("agent --model missing", _agent(None, "--localizer", "unet", "--model", "TMP/none"), 2,
         ("none",)),
    Case("agent --overlay a folder", _agent(None, "--localizer", "markers", "--overlay", "TMP"),
         2, ("Is a directory",)),
    Case("agent unet config garbage", _unet_dir, 2, ("config.json",)),
    Case("generate ct a FIFO", _fifo_ct, 2, ("ct.nii.gz", "not a regular file")),
    Case("prompt file not UTF-8", _prompt(b"\xff{question}"), 2, ("p.txt", "not UTF-8")),
    Case("prompt file a FIFO", _prompt(None), 2, ("p.txt", "not a regular file")),
    Case("phantom into a non-empty folder", _phantom_into_data, 2, ("not a phantom folder",),
         _data_intact),
    Case("splits over 1", _splits("0.5,0.5,0.5"), 2, ("--splits", "sum to 1")),
    Case("splits negative", _splits("1.2,-0.1,-0.1"), 2, ("--splits", "sum to 1")),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=str)
def test_hostile_cli_inputs(case, base, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    try:
        run_case(case, tmp_path, base, capsys, monkeypatch)
    except SystemExit as exc:  # argparse refuses a bad flag value itself (exit 2, one line)
        err = capsys.readouterr().err
        assert exc.code == case.code and all(w in err for w in case.words), err
