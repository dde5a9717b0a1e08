"""Qwen2-VL without torchvision: its processor cannot be made here (transformers 5 checks its
video processor's class, which needs torchvision), so ``hf:`` refuses the folder in one line;
the rest of the path runs on the tiny model (tests/tiny_vlm.py ``build_tiny_qwen2_vl``) with
the processor's one job done by hand from its real parts (tokenizer with the chat template,
PIL image processor): ``<|image_pad|>`` repeated once per merged 2x2 patch. Through it run the
``hf:`` backend's batched, left-padded generation (3-D rotary positions) and ``probe vlm``'s
stage reader (merger input put back in row-major order)."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from radspatial.models import Decoding, Request, create_backend

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def qwen2_vl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shared_datasets import tiny_vlm

    return tiny_vlm(tmp_path_factory, "qwen2_vl")


def _png(seed: int, size: tuple[int, int]) -> bytes:
    pixels = (np.random.default_rng(seed).random((*size, 3)) * 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


class _Backend:
    """An ``hf:`` backend's model, tokenizer and ``_encode``, made from the folder's parts."""

    def __init__(self, folder: Path, max_tokens: int = 3) -> None:
        from transformers import AutoImageProcessor, AutoTokenizer, Qwen2VLForConditionalGeneration

        from radspatial.models.hf import HFBackend

        self.hf = HFBackend.__new__(HFBackend)  # its methods, on the parts below
        hf = self.hf
        hf.spec, hf.device, hf.dtype, hf.batch_size = f"hf:{folder}", "cpu", "float32", 8
        hf.decoding, hf.encoder_decoder = Decoding(max_tokens=max_tokens), False
        hf.model = Qwen2VLForConditionalGeneration.from_pretrained(folder).eval()
        hf.tokenizer = hf.processor = AutoTokenizer.from_pretrained(folder)
        self.images = AutoImageProcessor.from_pretrained(folder)
        hf._encode = self.encode

    def encode(self, batch: list[Request]) -> Any:
        conversations, pictures = [], []
        for req in batch:
            content: list[dict[str, Any]] = [{"type": "text", "text": req.prompt}]
            content.insert(len(content) if req.text_first else 0, {"type": "image"})
            conversations.append([{"role": "user", "content": content}])
            pictures.append(Image.open(io.BytesIO(req.image_png)).convert("RGB"))
        tok = self.hf.tokenizer
        texts = tok.apply_chat_template(conversations, add_generation_prompt=True, tokenize=False)
        vision = self.images(images=pictures, return_tensors="pt")
        merge = self.images.merge_size**2
        texts = [
            text.replace("<|image_pad|>", "<|image_pad|>" * (int(grid.prod()) // merge))
            for text, grid in zip(texts, vision["image_grid_thw"], strict=True)
        ]
        encoded = tok(texts, padding=True, return_tensors="pt")
        encoded.update(vision)
        image = encoded["input_ids"] == tok.convert_tokens_to_ids("<|image_pad|>")
        encoded["mm_token_type_ids"] = image.long()  # 1: image token (for the 3-D positions)
        return encoded


def test_hf_refuses_it_in_one_line_without_torchvision(qwen2_vl: Path) -> None:
    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed: the processor can be made")
    with pytest.raises(ValueError, match=r"cannot load the model: .*requires the Torchvision") as e:
        create_backend(f"hf:{qwen2_vl}", decoding=Decoding())
    assert "\n" not in str(e.value)


def test_batched_generation_matches_one_at_a_time(qwen2_vl: Path) -> None:
    backend = _Backend(qwen2_vl).hf
    sizes = [(32, 48), (64, 64), (40, 32)]  # 2x3, 4x4 and 2x2 merged tokens: padded unevenly
    requests = [Request(f"k{i}", "Is the liver left ?", _png(i, s)) for i, s in enumerate(sizes)]
    together = backend._generate_batch(requests)
    alone = [backend._generate_batch([r])[0] for r in requests]
    assert together == alone
    assert [p for _, _, p in together] == [p for _, _, p in alone]
    # prompt tokens: the template's tokens plus one image token per merged 2x2 patch
    assert together[1][2] - together[0][2] == 16 - 6 and together[0][2] - together[2][2] == 6 - 4


def test_probe_stage_reader_reads_every_stage(qwen2_vl: Path) -> None:
    from radspatial.probes.vlm_extract import StageReader

    reader = StageReader(_Backend(qwen2_vl).hf, layers=(-1,))
    assert reader.kind == "qwen2_vl" and reader.stages == ("vision", "projector", "lm2")
    png = _png(5, (32, 64))  # 64 wide, 32 high: 4x8 patches, 2x4 merged tokens
    stages = reader.read("Is the liver left ?", png, [(4.0, 4.0), (60.0, 28.0)])
    assert set(stages) == {"vision", "projector", "lm2"}
    for name, f in stages.items():
        assert f.pooled.shape == (32,) and len(f.at_points) == 2, name
        assert not np.allclose(f.at_points[0], f.at_points[1]), name  # two cells, not one
