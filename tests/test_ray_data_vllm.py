"""``vllm:`` with ``--executor ray`` (Ray Data's LLM processor) cannot run here (no GPU, no
vLLM): the clear error, the processor config, rows, messages and replies it builds; and the
eval flags that choose an executor."""

from __future__ import annotations

import base64
import importlib.util
import io

import pytest
from PIL import Image

from radspatial.cli import build_parser
from radspatial.cli.eval_options import backend_options
from radspatial.models import Decoding, Request, create_backend
from radspatial.models.base import MissingDependency
from radspatial.models.ray_data_vllm import (
    engine_row,
    processor_config,
    reply_of,
    request_row,
    sampling_params,
)


def _png() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (5, 3), (200, 10, 30)).save(buf, format="PNG")
    return buf.getvalue()


def test_without_vllm_the_error_says_what_to_install() -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed: the missing-vllm error cannot be shown")
    with pytest.raises(MissingDependency, match=r"pip install 'ray\[data,llm\]' vllm"):
        create_backend("vllm:Qwen/Qwen2.5-VL-3B-Instruct", executor="ray", replicas=2)


def test_the_processor_config_carries_our_decoding_and_options() -> None:
    decoding = Decoding(temperature=0.0, max_tokens=32, seed=7)
    config = processor_config(
        "/models/qwen", decoding=decoding, replicas=4, batch_size=8,
        engine_kwargs={"max_model_len": 8192, "tensor_parallel_size": 2},
    )  # fmt: skip
    assert config == {
        "model_source": "/models/qwen",
        "engine_kwargs": {
            "limit_mm_per_prompt": {"image": 1},
            "seed": 7,
            "max_model_len": 8192,
            "tensor_parallel_size": 2,
        },
        "concurrency": 4,
        "batch_size": 8,
        "prepare_multimodal_stage": True,
        "should_continue_on_error": True,
    }
    assert sampling_params(decoding) == {
        "temperature": 0.0, "max_tokens": 32, "top_p": 1.0, "seed": 7
    }  # fmt: skip
    with pytest.raises(ValueError, match="replicas"):
        processor_config("m", decoding=decoding, replicas=0)
    try:  # where Ray Data's LLM module imports, the config must be one it accepts
        from ray.data.llm import vLLMEngineProcessorConfig
    except ImportError:
        return
    built = vLLMEngineProcessorConfig(**config)
    assert built.model_source == "/models/qwen" and built.batch_size == 8


@pytest.mark.parametrize("text_first", [False, True])
def test_rows_become_the_messages_of_the_in_process_vllm_backend(text_first: bool) -> None:
    from radspatial.models.vllm_backend import chat_message

    png = _png()
    req = Request("key1", "Is the liver left of the spleen?", png, text_first=text_first)
    row = request_row(req)
    assert set(row) == {"key", "prompt", "png_b64", "text_first"}
    assert all(isinstance(v, str | bool) for v in row.values())  # flat, Arrow-friendly
    out = engine_row(row, Decoding(max_tokens=5))
    assert out["key"] == "key1" and out["messages"] == chat_message(req)
    parts = out["messages"][0]["content"]
    assert [p["type"] for p in parts] == (
        ["text", "image_url"] if text_first else ["image_url", "text"]
    )
    url = next(p["image_url"]["url"] for p in parts if p["type"] == "image_url")
    assert base64.b64decode(url.removeprefix("data:image/png;base64,")) == png
    assert out["sampling_params"]["max_tokens"] == 5
    text_only = engine_row(request_row(Request("k2", "yes?", None)), Decoding())
    assert text_only["messages"][0]["content"] == [{"type": "text", "text": "yes?"}]


def test_output_rows_become_replies_and_engine_errors_stay_errors() -> None:
    ok = reply_of({"key": "a", "generated_text": "Yes", "num_generated_tokens": 2,
                   "__inference_error__": ""})  # fmt: skip
    assert ok.text == "Yes" and ok.error is None and ok.meta == {"new_tokens": 2}
    bad = reply_of({"key": "b", "generated_text": "", "__inference_error__": "OOM\ntrace"})
    assert bad.text is None and bad.error == "vLLM (Ray Data): OOM"


def _args(*extra: str):
    argv = ["eval", "--data", "d", "--out", "o", *extra]
    return build_parser().parse_args(argv)


def test_executor_flags_apply_to_hf_and_vllm_only() -> None:
    def opts(spec: str, *extra: str) -> dict:
        return backend_options(_args("--model", spec, *extra), spec)

    assert opts("hf:/m") == {}
    got = opts("hf:/m", "--executor", "ray", "--replicas", "3", "--model-args", "batch_size=4")
    assert got == {"batch_size": 4, "executor": "ray", "replicas": 3, "address": None}
    got = opts("vllm:m", "--executor", "ray", "--ray-address", "a",
               "--model-args", "batch_size=32,tensor_parallel_size=2")  # fmt: skip
    assert got == {"batch_size": 32, "tensor_parallel_size": 2, "executor": "ray",
                   "replicas": None, "address": "a"}  # fmt: skip
    for extra, message in [
        (["hf:/m", "--replicas", "2"], "need --executor ray"),
        (["baseline:yes", "--executor", "ray"], "hf/vllm models only"),
        (["hf:/m", "--executor", "ray", "--replicas", "0"], "--replicas must be"),
    ]:
        with pytest.raises(ValueError, match=message):
            opts(*extra)
    with pytest.raises(ValueError, match="needs --executor ray"):
        create_backend("hf:/m", replicas=2)


def test_cli_vllm_on_ray_without_vllm_exits_2_naming_the_fix(tmp_path, capsys) -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed")
    from synth import write_case

    from radspatial.bench.dataset import build_dataset
    from radspatial.bench.generate import GenerateConfig
    from radspatial.cli import main
    from radspatial.imaging.volumes import Case

    ct, seg = write_case(tmp_path / "in")
    build_dataset([Case("s", ct, seg)], GenerateConfig(size=128, as_count=2), tmp_path / "ds")
    argv = ["eval", "--data", str(tmp_path / "ds"), "--out", str(tmp_path / "run"),
            "--model", "vllm:/models/qwen", "--executor", "ray", "--replicas", "2"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'ray[data,llm]' vllm" in err[0]
    assert not (tmp_path / "run").exists()  # no empty run folder left behind
