"""The Python API refuses what ``radspatial generate`` refuses (issue 23): one checker of the
inputs (``bench/inputs.py``) behind both, each refusal naming the parameters in the caller's
words (issue 35): ``--seg-dir`` on the command line, ``seg_dir=`` in Python."""

from __future__ import annotations

import pytest

from radspatial import api
from radspatial.cli import main
from radspatial.core.runtime import bundled_example
from radspatial.imaging.volumes import InputError

CT, SEG = bundled_example()
# (flags as typed, the same as API keywords, words of the CLI's one-line refusal, the API's)
REFUSED = [
    (["--ct", str(CT)], {"ct": CT}, "--ct needs --seg (multilabel mask) or --seg-dir",
     "ct= needs seg= (multilabel mask) or seg_dir="),
    (["--seg", str(SEG)], {"seg": SEG}, "--seg/--seg-dir need --ct", "seg=/seg_dir= need ct="),
    (["--variant", "mirrored"], {"variant": "mirrored"},
     "--variant mirrored: the bundled example is normal anatomy",
     "variant= mirrored: the bundled example is normal anatomy"),
    (["--labels", "btcv"], {"labels": "btcv"}, "--labels btcv: the bundled example is",
     "labels= btcv: the bundled example is TotalSegmentator's"),
    (["--ct", str(CT), "--seg", str(SEG), "--variant", "../x"],
     {"ct": CT, "seg": SEG, "variant": "../x"},
     "--variant '../x': use letters, digits, _ and -",
     "variant= '../x': use letters, digits, _ and -"),
    (["--ct", str(CT), "--seg", str(SEG), "--case-id", "../evil"],
     {"ct": CT, "seg": SEG, "case_id": "../evil"},
     "--case-id: case id '../evil' is not allowed", "case_id=: case id '../evil' is not allowed"),
    (["--case-id", "a b"], {"case_id": "a b"}, "--case-id: case id 'a b' is not allowed",
     "case_id=: case id 'a b' is not allowed"),
    (["--ct", str(CT), "--seg-dir", str(SEG.parent), "--labels", "btcv"],
     {"ct": CT, "seg_dir": SEG.parent, "labels": "btcv"},
     "--labels btcv: a --seg-dir folder is TotalSegmentator's",
     "labels= btcv: a seg_dir= folder is TotalSegmentator's"),
    (["--cases", "x.csv", "--case-id", "a"], {"cases": "x.csv", "case_id": "a"},
     "--case-id goes with --ct; --cases takes a case-id column",
     "case_id= goes with ct=; cases= takes a case-id column"),
    (["--cases", "x.csv", "--seg", str(SEG)], {"cases": "x.csv", "seg": SEG},
     "--seg/--seg-dir go with --ct, not --cases", "seg=/seg_dir= go with ct=, not cases="),
    (["--modality", "mr"], {"modality": "mr"}, "--modality mr: the bundled example is a CT",
     "modality= mr: the bundled example is a CT"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("flags", "keywords", "cli_words", "api_words"), REFUSED, ids=[r[2] for r in REFUSED]
)
def test_the_api_refuses_what_the_cli_refuses_in_its_own_words(
    tmp_path, capsys, flags, keywords, cli_words, api_words
):
    code = main(["generate", "--out", str(tmp_path / "cli"), *flags])
    err = capsys.readouterr().err
    assert code == 2 and cli_words in err and "=" not in err, err
    with pytest.raises((ValueError, InputError)) as refused:
        api.generate(tmp_path / "api", **keywords)
    assert api_words in str(refused.value) and "--" not in str(refused.value)
    assert not (tmp_path / "cli").exists() and not (tmp_path / "api").exists()


def test_both_ct_and_cases_are_named_in_each_face(tmp_path):
    """The API takes ``ct`` and ``cases`` together (argparse would refuse them first)."""
    with pytest.raises(ValueError, match=r"^ct= and cases=: give one of them$"):
        api.generate(tmp_path / "api", ct=CT, cases="x.csv")
    with pytest.raises(ValueError, match=r"^seg= and seg_dir=: give one of them$"):
        api.generate(tmp_path / "api", ct=CT, seg=SEG, seg_dir=SEG.parent)
