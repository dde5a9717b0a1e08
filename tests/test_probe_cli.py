"""probe build/train/eval print readable tables: percentages, chance, the train accuracy."""

from __future__ import annotations

import json
import re

from radspatial.cli import main


def test_probe_commands_print_readable_summaries(tmp_path, capsys):
    ph = tmp_path / "ph"
    assert main(["phantom", "--out", str(ph), "--n", "3", "--shape", "96,96,24"]) == 0
    probes, run = tmp_path / "probes", tmp_path / "run"
    argv = ["probe", "build", "--cases", str(ph / "cases.csv"), "--out", str(probes)]
    argv += ["--size", "64", "--crop", "32", "--tasks", "orient,localize", "--max-per-case", "6"]
    capsys.readouterr()
    assert main([*argv, "--splits", "0.34,0.33,0.33"]) == 0
    out = capsys.readouterr().out
    info = json.loads((probes / "probes.json").read_text())
    assert "probes:" in out and "(2 task(s), 3 case(s), seed 0)" in out
    orient = next(x for x in out.splitlines() if x.strip().startswith("orient"))
    c = info["tasks"]["orient"]["counts"]
    assert re.search(rf"{c['train']}\s+{c['val']}\s+{c['test']}\s+12\.5%$", orient), orient
    assert "{" not in out  # no dict reprs
    argv = ["probe", "train", "--data", str(probes), "--encoder", "resnet-small", "--epochs", "1"]
    assert main([*argv, "--out", str(run)]) == 0
    out = capsys.readouterr().out
    res = json.loads((run / "results.json").read_text())["tasks"]["orient"]
    acc = f"{100 * res['test']['accuracy']:.1f}%"
    line = next(x for x in out.splitlines() if x.strip().startswith("orient"))
    assert "accuracy" in line and acc in line and "12.5%" in line, line
    assert "distance (lower=better)" in out and " px" in out and "{" not in out
    assert main(["probe", "eval", "--model", str(run), "--data", str(probes)]) == 0
    out = capsys.readouterr().out
    assert "split test" in out and acc in out and "{" not in out


def test_probe_build_context_free_crops_and_symmetry_mask(tmp_path, capsys):
    out = tmp_path / "p"
    argv = ["probe", "build", "--out", str(out), "--size", "64", "--crop", "32"]
    argv += ["--context", "remove", "--tasks", "permutation,symmetry_mask"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    info = json.loads((out / "probes.json").read_text())
    assert info["config"]["context"] == "remove" and set(info["tasks"]) == {
        "permutation",
        "symmetry_mask",
    }
    assert re.search(r"symmetry_mask\s+3\s+classification", printed) and "33.3%" in printed
