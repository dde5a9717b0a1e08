"""Tiny, randomly initialised vision-language models built on disk, with no downloads: one
builder per transformers family, ``build_tiny_<family>(folder) -> folder`` (docs/backends.md).

Each builder writes what ``hf:FOLDER`` loads (``AutoModelForImageTextToText`` and
``AutoProcessor``): a model made from its config (hidden size 32, 1-2 layers, a vision tower on
32x32 images), a tokenizer and an image processor made here, and a chat template shaped like the
family's own (its image placeholder, its role markers). Shared parts:

- the tokenizer is a ``tokenizers`` WordLevel model over a small vocabulary, wrapped as a
  ``PreTrainedTokenizerFast`` with ``<s>``, ``</s>``, ``<pad>``, ``<unk>`` and the family's
  image tokens (named as the family's processor reads them, e.g. ``tokenizer.image_token``);
- the image processor is the family's PIL one, so no torchvision is needed.

LLaVA is the plainest: a CLIP vision tower, a two-layer projector and a Llama decoder, with a
fixed number of image tokens per image. The models answer nonsense (random weights); they exist
to drive the real ``hf:`` code path.

Example::

    path = build_tiny_llava(tmp_path / "tiny-llava")
    backend = create_backend(f"hf:{path}")
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

IMAGE_SIZE = 32
PATCH_SIZE = 8
HIDDEN = 32
SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>", "<image>"]
_WORDS = """
yes no left right above below anterior posterior superior inferior is the of a an
organ liver spleen kidney aorta image ct slice which structure answer one word only
user assistant : ? . , 1 2 3 4 5 6 7 8 9 0 A B C D
"""
WORDS = _WORDS.split()
CLIP_MEAN = [0.48145466, 0.4578275, 0.40821073]
CLIP_STD = [0.26862954, 0.26130258, 0.27577711]


def _template(image: str, *, user: str = "USER: ", assistant: str = "ASSISTANT:") -> str:
    """A one-turn chat template: ``{{bos}}USER: <image>\\ntext\\nASSISTANT:`` with the family's
    image placeholder and role markers (its system turn, if any, written like a user's)."""
    return (
        "{{ bos_token }}{% for message in messages %}"
        f"{{% if message['role'] == 'assistant' %}}{assistant}{{% else %}}{user}{{% endif %}}"
        "{% if message['content'] is string %}{{ message['content'] }}"
        "{% else %}{% for part in message['content'] %}"
        f"{{% if part['type'] == 'image' %}}{image}{{{{ '\\n' }}}}"
        "{% elif part['type'] == 'text' %}{{ part['text'] }}"
        "{% endif %}{% endfor %}{% endif %}{{ '\\n' }}"
        f"{{% endfor %}}{{% if add_generation_prompt %}}{assistant}{{% endif %}}"
    )


CHAT_TEMPLATE = _template("<image>")


def _build_tokenizer(
    template: str | None = CHAT_TEMPLATE,
    *,
    special: tuple[str, ...] = (),
    named: dict[str, str] | None = None,
    bos: str = "<s>",
    eos: str = "</s>",
) -> Any:  # -> PreTrainedTokenizerFast
    """The WordLevel tokenizer over ``WORDS``; ``special``: the family's extra special tokens,
    ``named``: attributes its processor reads (``{"image_token": "<image>"}``)."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    extra = [t for t in (*special, *(named or {}).values()) if t not in SPECIAL_TOKENS]
    tokens = list(dict.fromkeys([*SPECIAL_TOKENS, bos, eos, *extra]))
    vocab = {tok: i for i, tok in enumerate([*tokens, *WORDS])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation()]
    )
    kwargs: dict[str, Any] = {"chat_template": template} if template else {}
    if named:
        kwargs["extra_special_tokens"] = dict(named)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=bos,
        eos_token=eos,
        unk_token="<unk>",
        pad_token="<pad>",
        padding_side="left",
        **kwargs,
    )
    # already in the vocabulary: marked special (matched whole, skipped in decoding), no new ids
    tokenizer.add_tokens([AddedToken(t, special=True) for t in ["<image>", *extra]])
    return tokenizer


def _llama(tokenizer: Any, **overrides: Any) -> Any:
    """A 2-layer Llama decoder config over ``tokenizer``'s vocabulary."""
    from transformers import LlamaConfig

    return LlamaConfig(**_text_kwargs(tokenizer, **overrides))


def _text_kwargs(tokenizer: Any, **overrides: Any) -> dict[str, Any]:
    return {
        "vocab_size": len(tokenizer),
        "hidden_size": HIDDEN,
        "intermediate_size": 2 * HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "pad_token_id": tokenizer.pad_token_id,
        **overrides,
    }


def _clip(**overrides: Any) -> Any:
    from transformers import CLIPVisionConfig

    return CLIPVisionConfig(**_vision_kwargs(projection_dim=HIDDEN, **overrides))


def _vision_kwargs(**overrides: Any) -> dict[str, Any]:
    return {
        "hidden_size": HIDDEN,
        "intermediate_size": 2 * HIDDEN,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "image_size": IMAGE_SIZE,
        "patch_size": PATCH_SIZE,
        **overrides,
    }


@dataclass(frozen=True)
class _Parts:
    """A processor's parts, saved side by side, where the processor itself cannot be made
    (Qwen2-VL's needs torchvision for its video processor)."""

    image_processor: Any
    tokenizer: Any

    def save_pretrained(self, path: Path) -> None:
        self.image_processor.save_pretrained(path)
        self.tokenizer.save_pretrained(path)  # with its chat template


def _save(model_class: Any, config: Any, processor: Any, path: Path, seed: int) -> Path:
    """The model from ``config`` (seeded), its generation ids from the tokenizer, and the
    processor, written to ``path``."""
    import torch

    tokenizer = processor.tokenizer
    torch.manual_seed(seed)
    model = model_class(config).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def _clip_processor(**overrides: Any) -> Any:
    from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

    return CLIPImageProcessorPil(**_clip_image_kwargs(**overrides))


def _clip_image_kwargs(**overrides: Any) -> dict[str, Any]:
    return {
        "size": {"shortest_edge": IMAGE_SIZE},
        "crop_size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        "image_mean": CLIP_MEAN,
        "image_std": CLIP_STD,
        **overrides,
    }


def build_tiny_llava(path: str | Path, *, seed: int = 0) -> Path:
    """LLaVA-1.5: CLIP + Llama, 16 image tokens per image at ``<image>``."""
    from transformers import LlavaConfig, LlavaForConditionalGeneration, LlavaProcessor

    tokenizer = _build_tokenizer()
    processor = LlavaProcessor(
        image_processor=_clip_processor(),
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token, dropped again by "default"
        chat_template=CHAT_TEMPLATE,
    )
    config = LlavaConfig(
        vision_config=_clip(),
        text_config=_llama(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        image_seq_length=(IMAGE_SIZE // PATCH_SIZE) ** 2,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    return _save(LlavaForConditionalGeneration, config, processor, Path(path), seed)


def build_tiny_llava_next(path: str | Path, *, seed: int = 0) -> Path:
    """LLaVA-NeXT: LLaVA with "anyres" tiling: the image at 32x32 plus its 32x32 tiles of the
    best-fitting grid (here up to 2x2), each 16 tokens, with a newline token per row."""
    from transformers import (
        LlavaNextConfig,
        LlavaNextForConditionalGeneration,
        LlavaNextProcessor,
    )
    from transformers.models.llava_next.image_processing_pil_llava_next import (
        LlavaNextImageProcessorPil,
    )

    template = _template("<image>", user="[INST] ", assistant="[/INST]")
    tokenizer = _build_tokenizer(template)
    pinpoints = [[32, 64], [64, 32], [64, 64]]
    images = LlavaNextImageProcessorPil(**_clip_image_kwargs(image_grid_pinpoints=pinpoints))
    processor = LlavaNextProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=template,
    )
    config = LlavaNextConfig(
        vision_config=_clip(),
        text_config=_llama(tokenizer),
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        image_grid_pinpoints=pinpoints,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    return _save(LlavaNextForConditionalGeneration, config, processor, Path(path), seed)


def build_tiny_idefics3(path: str | Path, *, seed: int = 0) -> Path:
    """Idefics3 (SmolVLM's architecture): a SigLIP tower whose 4x4 patches a pixel shuffle
    folds to 4 tokens; the image is split into up to 2x2 tiles of 32 px plus a global view,
    each wrapped in ``<fake_token_around_image><row_i_col_j>`` (``<global-img>``)."""
    from transformers import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3Processor,
        Idefics3VisionConfig,
    )
    from transformers.models.idefics3.image_processing_pil_idefics3 import (
        Idefics3ImageProcessorPil,
    )

    grid = [f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7)]
    wrap = ("<fake_token_around_image>", "<global-img>", "<end_of_utterance>")
    template = _template("<image>", user="User:", assistant="Assistant:")
    tokenizer = _build_tokenizer(template, special=(*wrap, *grid), eos="<end_of_utterance>")
    images = Idefics3ImageProcessorPil(
        size={"longest_edge": 2 * IMAGE_SIZE},
        max_image_size={"longest_edge": IMAGE_SIZE},
        image_mean=[0.5] * 3,
        image_std=[0.5] * 3,
    )
    scale = 2
    tokens_per_tile = (IMAGE_SIZE // PATCH_SIZE) ** 2 // scale**2
    processor = Idefics3Processor(
        image_processor=images,
        tokenizer=tokenizer,
        image_seq_len=tokens_per_tile,
        chat_template=template,
    )
    config = Idefics3Config(
        vision_config=Idefics3VisionConfig(**_vision_kwargs()),
        text_config=_llama(tokenizer),
        image_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        scale_factor=scale,
        pad_token_id=tokenizer.pad_token_id,
    )
    return _save(Idefics3ForConditionalGeneration, config, processor, Path(path), seed)


def _square_images(module: str, name: str, **overrides: Any) -> Any:
    """The family's PIL image processor resizing to IMAGE_SIZE x IMAGE_SIZE."""
    import importlib

    cls = getattr(importlib.import_module(f"transformers.models.{module}"), name)
    size = {"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    return cls(size=size, image_mean=[0.5] * 3, image_std=[0.5] * 3, **overrides)


def build_tiny_gemma3(path: str | Path, *, seed: int = 0) -> Path:
    """Gemma 3 (MedGemma's architecture): a SigLIP tower on a 32x32 square whose 4x4 patches are
    average-pooled to 4 soft tokens, written as ``<start_of_image>`` in the chat and expanded to
    ``\\n\\n<start_of_image><image_soft_token>x4<end_of_image>\\n\\n``; turns are
    ``<start_of_turn>user ... <end_of_turn>`` and the reply follows ``<start_of_turn>model``."""
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3Processor,
        Gemma3TextConfig,
        SiglipVisionConfig,
    )

    named = {
        "boi_token": "<start_of_image>",
        "image_token": "<image_soft_token>",
        "eoi_token": "<end_of_image>",
    }
    template = _template(
        "<start_of_image>",
        user="<start_of_turn>user ",
        assistant="<end_of_turn> <start_of_turn>model ",
    )
    tokenizer = _build_tokenizer(
        template, special=("<start_of_turn>", "<end_of_turn>"), named=named, eos="<end_of_turn>"
    )
    tokens = 4
    images = _square_images("gemma3.image_processing_pil_gemma3", "Gemma3ImageProcessorPil")
    processor = Gemma3Processor(
        image_processor=images, tokenizer=tokenizer, image_seq_length=tokens, chat_template=template
    )
    text = Gemma3TextConfig(
        **_text_kwargs(tokenizer, head_dim=16, query_pre_attn_scalar=16, sliding_window=64)
    )
    ids = {k: tokenizer.convert_tokens_to_ids(v) for k, v in named.items()}
    config = Gemma3Config(
        text_config=text,
        vision_config=SiglipVisionConfig(**_vision_kwargs()),
        mm_tokens_per_image=tokens,
        boi_token_index=ids["boi_token"],
        eoi_token_index=ids["eoi_token"],
        image_token_index=ids["image_token"],
    )
    return _save(Gemma3ForConditionalGeneration, config, processor, Path(path), seed)


def build_tiny_paligemma(path: str | Path, *, seed: int = 0) -> Path:
    """PaliGemma: a SigLIP tower (16 tokens on 32x32) and a Gemma decoder reading the image
    tokens and the prompt as one prefix; no chat template (the processor writes
    ``<image>x16<bos>prompt\\n`` itself)."""
    from transformers import (
        GemmaConfig,
        PaliGemmaConfig,
        PaliGemmaForConditionalGeneration,
        PaliGemmaProcessor,
        SiglipVisionConfig,
    )

    tokenizer = _build_tokenizer(None, named={"image_token": "<image>"})
    tokens = (IMAGE_SIZE // PATCH_SIZE) ** 2
    images = _square_images(
        "siglip.image_processing_pil_siglip", "SiglipImageProcessorPil", image_seq_length=tokens
    )
    processor = PaliGemmaProcessor(image_processor=images, tokenizer=tokenizer)
    text = GemmaConfig(**_text_kwargs(tokenizer, head_dim=16))
    config = PaliGemmaConfig(
        vision_config=SiglipVisionConfig(**_vision_kwargs(projection_dim=HIDDEN)),
        text_config=text,
        image_token_index=tokenizer.image_token_id,
        projection_dim=HIDDEN,
        hidden_size=HIDDEN,
    )
    return _save(PaliGemmaForConditionalGeneration, config, processor, Path(path), seed)


def build_tiny_mllama(path: str | Path, *, seed: int = 0) -> Path:
    """Mllama (Llama 3.2 Vision): the image is cut into up to 2 tiles of 32 px that a tiled
    vision tower encodes; the decoder reads them through a cross-attention layer, so the prompt
    holds one ``<|image|>`` token per image (no expanded image tokens)."""
    from transformers import (
        MllamaConfig,
        MllamaForConditionalGeneration,
        MllamaProcessor,
        MllamaTextConfig,
        MllamaVisionConfig,
    )

    header = "<|start_header_id|>{}<|end_header_id|> "
    template = _template(
        "<|image|>",
        user=header.format("user"),
        assistant="<|eot_id|>" + header.format("assistant"),
    )
    special = ("<|start_header_id|>", "<|end_header_id|>", "<|python_tag|>")
    tokenizer = _build_tokenizer(
        template,
        special=special,
        named={"image_token": "<|image|>"},
        bos="<|begin_of_text|>",
        eos="<|eot_id|>",
    )
    images = _square_images(
        "mllama.image_processing_pil_mllama", "MllamaImageProcessorPil", max_image_tiles=2
    )
    processor = MllamaProcessor(image_processor=images, tokenizer=tokenizer, chat_template=template)
    vision = MllamaVisionConfig(
        **_vision_kwargs(num_hidden_layers=1, attention_heads=2),
        num_global_layers=1,
        intermediate_layers_indices=[0],
        vision_output_dim=2 * HIDDEN,
        max_num_tiles=2,
        supported_aspect_ratios=[[1, 1], [1, 2], [2, 1]],
    )
    text = MllamaTextConfig(**_text_kwargs(tokenizer, cross_attention_layers=[1]))
    config = MllamaConfig(
        vision_config=vision, text_config=text, image_token_index=tokenizer.image_token_id
    )
    return _save(MllamaForConditionalGeneration, config, processor, Path(path), seed)


def build_tiny_qwen2_vl(path: str | Path, *, seed: int = 0) -> Path:
    """Qwen2-VL: images at their own aspect ratio (rounded to 16 px, 32x32 to 64x64 here), 8 px
    patches merged 2x2 into one ``<|image_pad|>`` token each, between ``<|vision_start|>`` and
    ``<|vision_end|>``; 3-D rotary positions (time, row, column). Without torchvision its
    processor cannot be made (transformers 5 checks its video processor's class): the folder
    then holds the model, the tokenizer (with the chat template) and the image processor, which
    ``hf:`` cannot load; tests/test_vlm_qwen2.py runs the model from those parts."""
    from transformers import (
        Qwen2VLConfig,
        Qwen2VLForConditionalGeneration,
        Qwen2VLProcessor,
        Qwen2VLTextConfig,
        Qwen2VLVisionConfig,
    )
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
        Qwen2VLImageProcessorPil,
    )

    image = "<|vision_start|><|image_pad|><|vision_end|>"
    template = _template(
        image, user="<|im_start|>user ", assistant="<|im_end|> <|im_start|>assistant "
    )
    special = ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>")
    special += ("<|im_start|>", "<|im_end|>")
    tokenizer = _build_tokenizer(template, special=special, eos="<|im_end|>")
    images = Qwen2VLImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE**2, "longest_edge": (2 * IMAGE_SIZE) ** 2},
        patch_size=PATCH_SIZE,
        merge_size=2,
    )
    try:
        processor = Qwen2VLProcessor(
            image_processor=images, tokenizer=tokenizer, chat_template=template
        )
    except AttributeError:  # its video processor needs torchvision: the parts alone
        processor = _Parts(images, tokenizer)
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]}
    text = Qwen2VLTextConfig(**_text_kwargs(tokenizer, rope_parameters=rope))
    vision = Qwen2VLVisionConfig(
        depth=1, embed_dim=HIDDEN, hidden_size=HIDDEN, num_heads=2, patch_size=PATCH_SIZE
    )
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in special}
    config = Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
    )
    return _save(Qwen2VLForConditionalGeneration, config, processor, Path(path), seed)


def main(argv: list[str] | None = None) -> int:
    """``python tests/tiny_vlm.py FAMILY FOLDER``: ``build_tiny_FAMILY(FOLDER)``."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    names = sorted(n.removeprefix("build_tiny_") for n in globals() if n.startswith("build_tiny_"))
    if len(args) != 2 or args[0] not in names:
        print(f"usage: python tests/tiny_vlm.py {{{','.join(names)}}} FOLDER", file=sys.stderr)
        return 2
    print(globals()[f"build_tiny_{args[0]}"](args[1]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
