"""``radspatial export hf``: parquet shards with image bytes and every manifest field, a dataset
card; read back with pyarrow always and with Hugging Face ``datasets`` when installed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path, PurePath

import pytest
from synth import write_case

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example, main
from radspatial.core.io import read_jsonl
from radspatial.imaging.volumes import Case

pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hf") / "bench"
    ct, seg = bundled_example()
    config = GenerateConfig(
        size=96, as_count=4, question_types=("relative_position", "count"), export_masks=True
    )
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


@pytest.fixture(scope="module")
def exported(data, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hfout") / "bench_hf"
    assert main(["export", "hf", "--data", str(data), "--out", str(out)]) == 0
    return out


def _table(out: Path):
    import pyarrow as pa

    shards = sorted((out / "data").glob("test-*.parquet"))
    return pa.concat_tables([pq.read_table(p) for p in shards]), shards


def test_every_manifest_field_and_the_image_bytes_are_in_the_parquet(data, exported):
    table, shards = _table(exported)
    assert [p.name for p in shards] == ["test-00000-of-00001.parquet"]
    manifest = list(read_jsonl(data / "manifest.jsonl"))
    rows = table.to_pylist()
    assert len(rows) == len(manifest)
    fields = {k for r in manifest for k in r} | {"modality"}  # every row says its modality
    assert fields == set(table.column_names) and {"mask", "params"} <= fields
    assert {"decidable", "decidable_reason"} <= fields  # what the image decides (issue 46)
    assert {r["modality"] for r in rows} == {"CT"}
    for want, got in zip(manifest, rows, strict=True):
        for key, value in want.items():
            if key in ("image", "mask"):
                assert got[key]["path"] == value
                assert got[key]["bytes"] == (data / value).read_bytes()
            elif key == "source" and value is not None:
                assert got[key]["ct"] == PurePath(value["ct"]).name  # no local folders
                assert got[key]["ct_sha256"] == value["ct_sha256"]
            elif isinstance(value, dict):
                assert {k: got[key][k] for k in value} == value, key
            else:
                assert got[key] == value, key
    meta = json.loads(table.schema.metadata[b"huggingface"])
    assert meta["info"]["features"] == {"image": {"_type": "Image"}, "mask": {"_type": "Image"}}


def test_dataset_card_has_yaml_licence_and_provenance(data, exported):
    card = (exported / "README.md").read_text()
    head = card.split("---")[1]
    assert "license: apache-2.0" in head and "visual-question-answering" in head
    assert "path: data/test-*.parquet" in head
    info = json.loads((data / "dataset.json").read_text())
    assert info["cases"][0]["ct_sha256"] in card and "TotalSegmentator example CT" in card
    assert (exported / "LICENSE.totalsegmentator").is_file()
    assert f"| rq1/none | {info['counts']['rq1/none']['n']} |" in card


def test_shards_share_one_schema_and_user_data_has_no_licence_claimed(tmp_path):
    ct, seg = write_case(tmp_path / "in")
    data = tmp_path / "ds"
    build_dataset([Case("s", ct, seg)], GenerateConfig(size=96, as_count=2), data)
    out = tmp_path / "hf"
    argv = ["export", "hf", "--data", str(data), "--out", str(out), "--max-shard-mb", "0.05"]
    assert main(argv) == 0
    table, shards = _table(out)
    assert len(shards) > 2
    assert len({pq.read_schema(p) for p in shards}) == 1
    assert table.num_rows == sum(1 for _ in read_jsonl(data / "manifest.jsonl"))
    card = (out / "README.md").read_text()
    assert "license: other" in card and "Licence not stated" in card
    assert not (out / "LICENSE.totalsegmentator").exists()
    assert main([*argv, "--license", "cc-by-4.0", "--overwrite"]) == 0
    assert "license: cc-by-4.0" in (out / "README.md").read_text()


def test_bad_inputs_exit_2_with_one_line(data, tmp_path, capsys):
    def one_line(argv: list[str], needle: str) -> None:
        capsys.readouterr()
        assert main(argv) == 2
        err = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
        assert len(err) == 1 and needle in err[0], err

    one_line(["export", "hf", "--data", str(tmp_path), "--out", str(tmp_path / "o")], "manifest")
    bad = tmp_path / "bad"
    shutil.copytree(data, bad)
    lines = (bad / "manifest.jsonl").read_text().splitlines()
    lines[0] = json.dumps({**json.loads(lines[0]), "image": "../../etc/passwd"})
    (bad / "manifest.jsonl").write_text("\n".join(lines) + "\n")
    one_line(["export", "hf", "--data", str(bad), "--out", str(tmp_path / "o")], "image")
    assert not (tmp_path / "o").exists()
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    one_line(["export", "hf", "--data", str(data), "--out", str(full)], "--overwrite")


def test_datasets_loads_the_export(exported, data, monkeypatch, tmp_path):
    datasets = pytest.importorskip("datasets")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    ds = datasets.load_dataset(
        "parquet", data_dir=str(exported / "data"), split="test", cache_dir=str(tmp_path / "c")
    )
    manifest = list(read_jsonl(data / "manifest.jsonl"))
    assert ds.num_rows == len(manifest)
    assert isinstance(ds.features["image"], datasets.Image)
    first = ds[0]
    assert first["id"] == manifest[0]["id"] and first["question"] == manifest[0]["question"]
    assert first["image"].size == (96, 96)
    folder = datasets.load_dataset(str(exported), cache_dir=str(tmp_path / "c2"))
    assert folder["test"].num_rows == len(manifest)
