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
    from tiny_vlm import build_tiny_llava

    return build_tiny_llava(tmp_path_factory.mktemp("tiny-llava"))


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


def test_eval_end_to_end_with_the_tiny_model_reports_invalid_answers(tiny_llava, tmp_path) -> None:
    """The whole evaluator with a real (tiny, random) VLM: nonsense replies are invalid."""
    import json

    from synth import write_case

    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.eval.runner import EvalConfig, run_eval
    from radspatial.imaging.volumes import Case

    ct, seg = write_case(tmp_path / "in")
    data = tmp_path / "ds"
    build_dataset([Case("synth", ct, seg)], GenerateConfig(size=128, as_count=2), data)
    cfg = EvalConfig(model=f"hf:{tiny_llava}", runs=1, limit=6, decoding=Decoding(max_tokens=6))
    rows = run_eval(data, tmp_path / "run", cfg, progress=False)
    assert len(rows) == 6 and all(r["error"] is None and isinstance(r["reply"], str) for r in rows)
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    o = metrics["overall"]
    invalid = sum(r["parsed"] is None for r in rows) / 6
    assert o["invalid_rate"] == pytest.approx(invalid)
    assert o["accuracy_mean"] == pytest.approx(sum(r["correct"] for r in rows) / 6)
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["backend"]["backend"] == "hf" and run["status"] == "complete"
