"""Build a tiny, randomly initialised LLaVA model on disk, with no downloads.

LLaVA is used because it is the plainest ``AutoModelForImageTextToText`` architecture: a CLIP
vision tower, a two-layer projector and a Llama decoder, with a fixed number of image tokens per
image (no dynamic tiling), so a small config is a handful of numbers. Every piece is built here:

- the tokenizer is a ``tokenizers`` WordLevel model over a small vocabulary, wrapped as a
  ``PreTrainedTokenizerFast`` with ``<s>``, ``</s>``, ``<pad>``, ``<unk>`` and ``<image>``;
- the image processor is CLIP's (32x32 crop), created from a ``preprocessor_config.json`` written
  here, so ``AutoImageProcessor`` picks whichever backend (PIL or torchvision) is installed;
- the chat template is a short Jinja string shaped like LLaVA-1.5's
  ``USER: <image> ... ASSISTANT:``.

The model answers nonsense (random weights); it exists to drive the real ``hf:`` code path.

Example::

    path = build_tiny_llava(tmp_path / "tiny-llava")
    backend = create_backend(f"hf:{path}")
"""

from __future__ import annotations

import json
from pathlib import Path

IMAGE_SIZE = 32
PATCH_SIZE = 8
SPECIAL_TOKENS = ["<pad>", "<unk>", "<s>", "</s>", "<image>"]
_WORDS = """
yes no left right above below anterior posterior superior inferior is the of a an
organ liver spleen kidney aorta image ct slice which structure answer one word only
user assistant : ? . , 1 2 3 4 5 6 7 8 9 0 A B C D
"""
WORDS = _WORDS.split()
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ message['role'] | upper }}: "
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<image>{{ '\\n' }}"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}"
    "{% endif %}{% endfor %}{% endif %}{{ '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def _build_tokenizer():  # -> PreTrainedTokenizerFast
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *WORDS])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Whitespace(), pre_tokenizers.Punctuation()]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        pad_token="<pad>",
        additional_special_tokens=["<image>"],
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
    )


def _write_image_processor(path: Path) -> None:
    config = {
        "image_processor_type": "CLIPImageProcessor",
        "processor_class": "LlavaProcessor",
        "do_resize": True,
        "size": {"shortest_edge": IMAGE_SIZE},
        "do_center_crop": True,
        "crop_size": {"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        "do_rescale": True,
        "rescale_factor": 1 / 255,
        "do_normalize": True,
        "image_mean": [0.48145466, 0.4578275, 0.40821073],
        "image_std": [0.26862954, 0.26130258, 0.27577711],
        "do_convert_rgb": True,
        "resample": 3,
    }
    path.mkdir(parents=True, exist_ok=True)
    (path / "preprocessor_config.json").write_text(json.dumps(config, indent=2))


def build_tiny_llava(path: str | Path, *, seed: int = 0) -> Path:
    """Write a tiny random LLaVA (model, tokenizer, processor) to ``path`` and return it."""
    import torch
    from transformers import (
        AutoImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    path = Path(path)
    tokenizer = _build_tokenizer()
    _write_image_processor(path)
    image_processor = AutoImageProcessor.from_pretrained(path)
    processor = LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH_SIZE,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # CLIP's CLS token, dropped again by "default"
        chat_template=CHAT_TEMPLATE,
    )

    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=IMAGE_SIZE,
        patch_size=PATCH_SIZE,
        projection_dim=32,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        image_seq_length=(IMAGE_SIZE // PATCH_SIZE) ** 2,
        vision_feature_select_strategy="default",
        vision_feature_layer=-1,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path
