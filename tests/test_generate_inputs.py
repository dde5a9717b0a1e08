"""The Python API refuses what ``radspatial generate`` refuses (issue 23): one checker of the
inputs (``bench/inputs.py``) behind both, with the same words."""

from __future__ import annotations

import pytest

from radspatial import api
from radspatial.cli import main
from radspatial.core.runtime import bundled_example
from radspatial.imaging.volumes import InputError

CT, SEG = bundled_example()
# (flags as typed, the same as API keywords, words of the one-line refusal)
REFUSED = [
    (["--ct", str(CT)], {"ct": CT}, "--ct needs --seg"),
    (["--seg", str(SEG)], {"seg": SEG}, "--seg/--seg-dir need --ct"),
    (["--variant", "mirrored"], {"variant": "mirrored"}, "bundled example is normal anatomy"),
    (["--labels", "btcv"], {"labels": "btcv"}, "bundled example is TotalSegmentator's"),
    (
        ["--ct", str(CT), "--seg", str(SEG), "--variant", "../x"],
        {"ct": CT, "seg": SEG, "variant": "../x"},
        "use letters, digits, _ and -",
    ),
    (
        ["--ct", str(CT), "--seg", str(SEG), "--case-id", "../evil"],
        {"ct": CT, "seg": SEG, "case_id": "../evil"},
        "is not allowed",
    ),
    (
        ["--ct", str(CT), "--seg-dir", str(SEG.parent), "--labels", "btcv"],
        {"ct": CT, "seg_dir": SEG.parent, "labels": "btcv"},
        "a --seg-dir folder is TotalSegmentator's",
    ),
    (
        ["--cases", "x.csv", "--case-id", "a"],
        {"cases": "x.csv", "case_id": "a"},
        "--case-id goes with --ct",
    ),
]


@pytest.mark.parametrize(("flags", "keywords", "words"), REFUSED, ids=[w for *_, w in REFUSED])
def test_the_api_refuses_what_the_cli_refuses(tmp_path, capsys, flags, keywords, words):
    code = main(["generate", "--out", str(tmp_path / "cli"), *flags])
    assert code == 2 and words in capsys.readouterr().err
    with pytest.raises((ValueError, InputError), match=None) as refused:
        api.generate(tmp_path / "api", **keywords)
    assert words in str(refused.value)
    assert not (tmp_path / "cli").exists() and not (tmp_path / "api").exists()
