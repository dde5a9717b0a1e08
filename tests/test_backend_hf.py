"""The ``hf:`` backend on a tiny random LLaVA built in the test (no downloads), and ``vllm:``."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from radspatial.models import Decoding, Reply, Request, create_backend, list_backends

PROMPTS = [
    "Is the liver left of the spleen? Answer yes or no.",
    "Is the aorta anterior?",
    "Which structure is above: A or B?",
    "yes",
    "Is the kidney inferior of the liver in this CT slice? Answer one word only.",
]


def _png(seed: int, size: tuple[int, int]) -> bytes:
    rng = np.random.default_rng(seed)
    pixels = (rng.random((*size, 3)) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def _requests() -> list[Request]:
    sizes = [(40, 48), (32, 32), (64, 50), (37, 37), (48, 40)]
    return [
        Request(key=f"k{i}", prompt=p, image_png=_png(i, s))
        for i, (p, s) in enumerate(zip(PROMPTS, sizes, strict=True))
    ]


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from shared_datasets import tiny_vlm

    return tiny_vlm(tmp_path_factory, "llava")


def _run(backend, requests: list[Request]) -> list[tuple[Request, Reply]]:
    calls: list[tuple[Request, Reply]] = []
    backend.generate(requests, lambda req, rep: calls.append((req, rep)))
    return calls


def _texts(calls: list[tuple[Request, Reply]]) -> dict[str, str | None]:
    return {req.key: rep.text for req, rep in calls}


def test_specs_registered() -> None:
    assert {"hf", "vllm"} <= set(list_backends())


def test_hf_tiny_llava_batch(tiny_llava: Path) -> None:
    backend = create_backend(f"hf:{tiny_llava}", decoding=Decoding(max_tokens=8), batch_size=2)
    requests = _requests()
    calls = _run(backend, requests)

    assert [req.key for req, _ in calls] == [r.key for r in requests]  # once each, in order
    for _, reply in calls:
        assert reply.error is None
        assert isinstance(reply.text, str)
        assert 0 < reply.meta["new_tokens"] <= 8
    assert [rep.meta["batch_size"] for _, rep in calls] == [2, 2, 2, 2, 1]

    again = _run(backend, requests)
    assert _texts(again) == _texts(calls)  # greedy: deterministic

    # Left padding with an attention mask: one batch of 5 gives what batches of 2 gave.
    backend.batch_size = 5
    five = _run(backend, requests)
    assert _texts(five) == _texts(calls)
    # prompt tokens (image tokens included) count no padding: the same in batches of 2 and 5
    prompt = [rep.meta["prompt_tokens"] for _, rep in calls]
    assert prompt == [rep.meta["prompt_tokens"] for _, rep in five] and min(prompt) > 0

    info = backend.describe()
    assert json.loads(json.dumps(info)) == info
    assert info["device"] == "cpu" and info["dtype"] == "float32" and info["batch_size"] == 5
    assert info["model_class"] == "LlavaForConditionalGeneration"
    assert set(info["versions"]) == {"transformers", "torch"}
    assert info["allow_download"] is False and info["trust_remote_code"] is False  # issue 11


def test_hf_sampling_seeded(tiny_llava: Path) -> None:
    decoding = Decoding(temperature=1.0, max_tokens=6, seed=3)
    backend = create_backend(f"hf:{tiny_llava}", decoding=decoding, batch_size=5)
    requests = _requests()
    first = _texts(_run(backend, requests))
    assert first == _texts(_run(backend, requests))
    assert all(isinstance(t, str) for t in first.values())


def test_hf_failing_batch_retried_alone(tiny_llava: Path) -> None:
    backend = create_backend(f"hf:{tiny_llava}", decoding=Decoding(max_tokens=4), batch_size=3)
    requests = _requests()[:3]
    # Not a PNG: fails the batch, then fails alone; its neighbours succeed alone.
    requests[1] = Request(key="bad", prompt="yes", image_png=b"not a png")
    calls = _run(backend, requests)

    assert [req.key for req, _ in calls] == ["k0", "bad", "k2"]
    bad = calls[1][1]
    assert bad.text is None and bad.error and "Image" in bad.error
    for _, reply in (calls[0], calls[2]):
        assert isinstance(reply.text, str) and reply.meta["retried_alone"] is True


def test_vllm_without_vllm_raises_clear_error() -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed: the missing-vllm error cannot be shown")
    with pytest.raises(ImportError, match=r"install radspatial\[vllm\] on a machine with a GPU"):
        create_backend("vllm:Qwen/Qwen2.5-VL-3B-Instruct", decoding=Decoding())


# family -> model class, its image token, how many a 32x32 image gets, image first always
FAMILIES = {
    "llava": ("LlavaForConditionalGeneration", "<image>", 16, False),  # 4x4 patches
    "llava_next": ("LlavaNextForConditionalGeneration", "<image>", 36, False),  # 16, tile, 4 rows
    "idefics3": ("Idefics3ForConditionalGeneration", "<image>", 20, False),  # (2x2 + 1) x 4
    "gemma3": ("Gemma3ForConditionalGeneration", "<image_soft_token>", 4, False),  # 2x2 pooled
    "paligemma": ("PaliGemmaForConditionalGeneration", "<image>", 16, True),  # no chat template
    "mllama": ("MllamaForConditionalGeneration", "<|image|>", 1, False),  # cross-attention
}


@pytest.mark.parametrize("family", list(FAMILIES))
def test_eval_end_to_end_per_family(family: str, tmp_path_factory, tmp_path) -> None:
    """The whole evaluator with each family's tiny random VLM (tests/tiny_vlm.py): every item
    answered (nonsense, so mostly invalid), special tokens decoded away, usage counted; and the
    family's image tokens, as many as its processor makes, where the request puts the image."""
    pytest.importorskip("transformers")
    from shared_datasets import synth_128, tiny_vlm

    from radspatial.eval.runner import EvalConfig, run_eval

    model_class, image_token, n_image, image_first = FAMILIES[family]
    model = tiny_vlm(tmp_path_factory, family)
    cfg = EvalConfig(model=f"hf:{model}", runs=1, limit=4, decoding=Decoding(max_tokens=4))
    rows = run_eval(synth_128(tmp_path_factory), tmp_path, cfg, progress=False)
    assert len(rows) == 4 and all(r["error"] is None and isinstance(r["reply"], str) for r in rows)
    assert not any("<" in r["reply"] for r in rows)  # no <image>, <end_of_turn>, <row_1_col_1>
    o = json.loads((tmp_path / "metrics.json").read_text())["overall"]
    assert o["invalid_rate"] == pytest.approx(sum(r["parsed"] is None for r in rows) / 4)
    assert o["accuracy_mean"] == pytest.approx(sum(r["correct"] for r in rows) / 4)
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "complete" and run["backend"]["model_class"] == model_class
    usage = run["usage"]
    assert usage["calls_with_usage"] == usage["calls"] > 0
    assert usage["prompt_tokens"] > n_image * usage["calls"] and usage["completion_tokens"] > 0

    backend = create_backend(f"hf:{model}", decoding=Decoding(max_tokens=1))
    image_id = backend.tokenizer.convert_tokens_to_ids(image_token)
    for text_first in (True, False):
        request = Request("k", "Is the liver left ?", _png(0, (32, 32)), text_first=text_first)
        ids = backend._encode([request])["input_ids"][0].tolist()
        assert ids.count(image_id) == n_image
        tokens = backend.tokenizer.convert_ids_to_tokens(ids)
        assert (ids.index(image_id) < tokens.index("liver")) == (image_first or not text_first)
