"""Decoding per MIRP model family under --protocol mirp (models/families.py), recorded in
run.json, and text before the image for every backend in both protocols."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_server import FakeChatServer

from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import main
from radspatial.core.runtime import bundled_example
from radspatial.eval.runner import EvalConfig, run_eval
from radspatial.imaging.volumes import Case
from radspatial.models.base import Decoding, Request
from radspatial.models.families import family_of, settings
from radspatial.models.openai_client import build_payload
from radspatial.models.ray_data_vllm import sampling_params
from radspatial.models.vllm_backend import vllm_sampling


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    ct, seg = bundled_example()
    out = tmp_path_factory.mktemp("dec") / "ds"
    config = GenerateConfig(seed=3, size=128, setups=("rq1", "rq3"), markers=("dots",))
    build_dataset([Case("ct", ct, seg)], config, out, log=lambda _: None)
    return out


@pytest.mark.parametrize(
    ("spec", "family"),
    [
        ("openai:gpt-4o-2024-08-06", "gpt-4o"),
        ("vllm:/models/Pixtral-12B-2409", "pixtral"),
        ("hf:/models/Llama-3.2-11B-Vision-Instruct", "llama-3.2-vision"),
        ("hf:deepseek-ai/Janus-Pro-7B", "janus-pro"),
        ("hf:/models/Qwen2.5-VL-3B-Instruct", None),
        ("openai-compat:llama-3.1-8b@http://127.0.0.1:1/v1", None),  # no vision: not MIRP's
    ],
)
def test_families_are_recognised_from_the_model_name(spec, family):
    found = family_of(spec)
    assert (found.name if found else None) == family
    assert family_of(spec, "none") is None
    assert family_of("hf:/models/mine", "pixtral").name == "pixtral"
    with pytest.raises(ValueError, match="unknown family"):
        family_of(spec, "gpt-5")


def test_each_family_sends_what_mirps_script_sent():
    req = Request("k", "prompt", b"png")
    gpt = build_payload("gpt-4o", req, Decoding(family="gpt-4o"))
    assert gpt["temperature"] == 0.0 and "max_tokens" not in gpt and "seed" not in gpt
    assert "top_p" not in gpt
    assert gpt["messages"][0]["content"][1]["image_url"]["detail"] == "high"
    ours = build_payload("m", req, Decoding())
    assert (ours["temperature"], ours["max_tokens"], ours["top_p"], ours["seed"]) == (
        0.0,
        1024,
        1.0,
        0,
    )
    assert "detail" not in ours["messages"][0]["content"][1]["image_url"]
    # Pixtral: SamplingParams(max_tokens=8192), vLLM's temperature default, no seed
    pix = Decoding(family="pixtral")
    assert vllm_sampling(pix) == {"temperature": 1.0, "max_tokens": 8192, "seed": None}
    assert sampling_params(pix) == vllm_sampling(pix)
    # Llama: generate(max_new_tokens=1024) with the model's generation config; Janus greedy 512
    llama, janus = (
        settings(Decoding(family="llama-3.2-vision")),
        settings(Decoding(family="janus-pro")),
    )
    assert (llama.temperature, llama.max_tokens, llama.strip_newlines) == (None, 1024, True)
    assert (janus.temperature, janus.max_tokens) == (0.0, 512)
    assert "family" not in Decoding().to_json()  # call keys of our decoding unchanged


def test_protocol_mirp_applies_and_records_the_family(dataset, tmp_path):
    with FakeChatServer(answer=lambda body: "1\n") as server:
        spec = f"openai-compat:gpt-4o-mini@{server.base_url}"
        run_eval(dataset, tmp_path / "m", EvalConfig(model=spec, runs=1, protocol="mirp"))
        mirp_bodies = list(server.bodies)
        run_eval(dataset, tmp_path / "o", EvalConfig(model=spec, runs=1), progress=False)
        ours_bodies = server.bodies[len(mirp_bodies) :]
        args = ["eval", "--data", str(dataset), "--model", spec, "--runs", "1"]
        args += ["--out", str(tmp_path / "l"), "--protocol", "mirp"]
        assert main([*args, "--model-args", "family=llama-3.2-vision"]) == 0
    for body in mirp_bodies:
        image = body["messages"][0]["content"][1]["image_url"]
        assert image["detail"] == "high" and "max_tokens" not in body
    for body in mirp_bodies + ours_bodies:  # text before image, both protocols
        assert [p["type"] for p in body["messages"][0]["content"]] == ["text", "image_url"]
    assert all(b["max_tokens"] == 1024 and "detail" not in str(b) for b in ours_bodies)
    info = json.loads((tmp_path / "m" / "run.json").read_text())
    assert info["decoding_source"]["family"] == "gpt-4o"
    assert info["decoding_source"]["source"] == "MIRP 2_inference_code/gpt4o.py"
    assert info["decoding"]["family"] == "gpt-4o"
    ours = json.loads((tmp_path / "o" / "run.json").read_text())["decoding_source"]
    assert ours["family"] is None
    llama = json.loads((tmp_path / "l" / "run.json").read_text())
    assert llama["decoding_source"]["settings"]["max_tokens"] == 1024
    replies = [json.loads(x)["reply"] for x in (tmp_path / "l" / "results.jsonl").open()]
    assert replies and set(replies) == {"1"}  # MIRP's llama.py strips the newline
