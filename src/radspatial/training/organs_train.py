"""Training of the shipped ``organs`` localizer: a MONAI 2D U-Net on phantoms and real CT.

Data (built in memory, nothing downloaded): axial slices of ``n_phantoms`` synthetic phantoms
(:func:`radspatial.phantoms.make_phantom`, habitus and contrast phase drawn from the seed;
normal and displaced anatomy in turn) plus the bundled real CT (its mirrored counterfactual only
with ``--mirror-real``: see ``OrgansConfig``), rendered like the generator (radiological
display, square image, ``size`` px) but kept in HU so the window can be drawn per sample.
Labels: TotalSegmentator v2 ids with MIRP's grouping (vertebrae, ribs per side).

Augmentation, per sample, in one affine resampling: one of the 8 rotation/flip variants, a small
extra rotation, zoom and shift (with ``--elastic``, a smooth random displacement field added to
the same sampling grid); a HU offset per structure; then window (width, level), gamma, blur,
noise and 8-bit quantisation. Loss: Dice + cross-entropy over the known pixels
(``organs_loss``). Everything is drawn from generators keyed by ``seed``. ``--exclude a:86-97``
keeps slices out (a validation slab for ``benchmarks/bench_organs_val.py``).

Command (docs/howto/train.md; the shipped weights came from it, as ``python -m`` of this module):
``radspatial train organs --out src/radspatial/data/organs --steps 3000``."""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from radspatial.core.io import atomic_write_json, sha256_file
from radspatial.core.labels import load_table, with_v1_heart
from radspatial.core.runtime import keyed_rng
from radspatial.nets import unet
from radspatial.training.organs_augment import augment, elastic_field, one_cycle_lr, phase_table
from radspatial.training.organs_data import held_out, render_hu, render_lab

__all__ = ["OrgansConfig", "augment", "elastic_field", "one_cycle_lr", "train_organs"]

FORMAT = "radspatial-organs"
_MIN_CLASSES = 3  # a slice with fewer labelled structures teaches little


@dataclass(frozen=True)
class OrgansConfig:
    n_phantoms: int = 240
    phantom_shape: tuple[int, int, int] = (256, 256, 64)
    slice_step: int = 1
    real_weight: float = 0.4  # share of each batch drawn from the real CT
    # Normal anatomy only by default: a mirrored (or situs inversus) volume seen through a
    # horizontal flip is the original image with the side labels swapped, so with the 8
    # variants as augmentation it teaches the network that sides cannot be told (measured:
    # kidney_left found on the patient's right). Use them only without flip augmentation.
    phantom_variants: tuple[str, ...] = ("normal", "displaced")
    mirror_real: bool = False  # kept for the record; mirrored real volumes are not built
    volumes: tuple[str, ...] = ("a", "c")  # organs_data readers: patient A full, dcmqi_ct3
    wide_windows: float = 0.5  # share of samples shown at W350-2000 / L-100..200 (other tools)
    elastic: float = 0.0  # share of samples given a smooth random displacement field
    elastic_px: float = 6.0  # its peak displacement, px at ``size`` (image and labels together)
    exclude: tuple[str, ...] = ()  # "a:86-97": slices of a volume kept out (validation slab)
    label_hu_jitter: float = 40.0  # HU sd of a per-structure offset (contrast phases, scanners)
    enhance: float = 0.0  # share of samples given a drawn contrast phase (organs_augment)
    size: int = 256
    channels: tuple[int, ...] = (16, 32, 64, 128, 256)
    num_res_units: int = 1
    steps: int = 3000
    batch_size: int = 32
    lr: float = 2e-3
    seed: int = 0
    device: str = "cpu"
    workers: int = 1
    threads: int | None = None
    max_seconds: float | None = None  # a safety stop on shared machines (recorded if hit)
    init_from: str | None = None  # warm start from this model folder (organs_init)
    # slices synthesised from label maps (organs_labelmaps / organs_synth): which patients'
    # maps ("a" = patient A's labels, drawn anew; amos, s0327, s0328, mr), the share of each
    # batch drawn from them, images per slice, slice spacing
    synth: tuple[str, ...] = ()
    synth_weight: float = 0.0
    synth_draws: int = 2
    synth_step_mm: float = 3.0

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["phantom_shape"] = list(self.phantom_shape)
        d["channels"] = list(self.channels)
        d["phantom_variants"] = list(self.phantom_variants)
        d["volumes"] = list(self.volumes)
        d["exclude"] = list(self.exclude)
        d["synth"] = list(self.synth)
        return d


def volume_bank(
    ct: np.ndarray, seg: np.ndarray, spacing: tuple[float, ...], size: int, step: int
) -> tuple[np.ndarray, np.ndarray]:
    """(HU float16 (n, S, S), grouped label ids uint16 (n, S, S)) of the useful slices."""
    hus, labs = [], []
    for z in range(0, ct.shape[2], step):
        if len(np.unique(seg[:, :, z])) - 1 < _MIN_CLASSES:
            continue
        hus.append(render_hu(ct, z, spacing, size).astype(np.float16))
        labs.append(render_lab(seg, z, spacing, size))
    if not hus:
        return np.zeros((0, size, size), np.float16), np.zeros((0, size, size), np.uint16)
    return np.stack(hus), np.stack(labs)


def _phantom_bank(args: tuple[int, int, tuple[int, int, int], int, int, tuple[str, ...]]):
    from radspatial.phantoms import make_phantom

    seed, i, shape, size, step, variants = args
    variant = variants[i % len(variants)]
    ph = make_phantom(f"organs_{i:04d}", seed=seed, shape=shape, variant=variant)
    table = load_table("totalsegmentator", group=True)
    lut = np.arange(256, dtype=np.uint16)
    for src, dst in table.remap.items():
        if src < 256:
            lut[src] = dst
    lut[200] = 0  # the displaced variant's mass is not a TotalSegmentator structure
    spacing = tuple(abs(float(ph.affine[k, k])) for k in range(3))
    hu, lab = volume_bank(ph.ct, lut[ph.seg], spacing, size, step)
    return hu, lab.astype(np.uint8)


def build_banks(config: OrgansConfig, progress: bool = True):
    jobs = [
        (
            config.seed,
            i,
            config.phantom_shape,
            config.size,
            config.slice_step,
            config.phantom_variants,
        )
        for i in range(config.n_phantoms)
    ]
    if config.workers > 1:
        with ProcessPoolExecutor(config.workers) as pool:
            parts = list(pool.map(_phantom_bank, jobs, chunksize=2))
    else:
        parts = [_phantom_bank(j) for j in jobs]
    synth = (
        np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, config.size, config.size)),
        np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, config.size, config.size)),
    )
    from radspatial.training import organs_data

    vols = organs_data.training_volumes(None, config.volumes)
    real, sources = organs_data.banks(vols, config.size, organs_data.parse_exclude(config.exclude))
    real_source = {"volumes": sources, "slices": int(len(real[0]))}
    from radspatial.training.organs_labelmaps import synth_banks

    drawn, real_source["synthesised"] = synth_banks(config, vols)
    real_source["plausibility"] = organs_data.plausibility_of(real, drawn)
    names = with_v1_heart(load_table("totalsegmentator", group=True)).names
    real_source["levels"] = organs_data.levels_record(sources, real[1], names)
    if progress:
        counts = f"{len(synth[0])} phantom, {len(real[0])} real, {len(drawn[0])} synthesised"
        print(f"organs: {counts} slices", flush=True)
    return synth, real, drawn, real_source


def class_list(labs: list[np.ndarray]) -> list[tuple[int, str]]:
    names = with_v1_heart(load_table("totalsegmentator", group=True)).names
    ids = sorted(set().union(*(set(np.unique(x).tolist()) for x in labs)) - {0})
    return [(0, "background")] + [(i, names[i]) for i in ids if i in names and i < 65535]


def train_organs(
    out: Path, config: OrgansConfig, *, progress: bool = True, data: tuple | None = None
) -> dict[str, Any]:
    """Build the data (or take ``data``, :func:`build_banks`'s result), train, write
    ``model.safetensors`` + ``config.json`` to ``out``."""
    import torch

    started = time.perf_counter()
    synth, real, drawn, real_source = data or build_banks(config, progress)
    data_s = time.perf_counter() - started
    from radspatial.training import organs_data

    classes = class_list([synth[1], real[1], drawn[1]])
    lut = np.zeros(65536, np.int64)
    for index, (label_id, _) in enumerate(classes):
        lut[label_id] = index
    lut[organs_data.IGNORE] = 255
    dev = torch.device(config.device)
    shares = (1 - config.real_weight - config.synth_weight, config.real_weight)
    shares += (config.synth_weight,)
    banks = [
        (torch.from_numpy(h).to(dev), torch.from_numpy(lut[lab].astype(np.uint8)).to(dev), w)
        for (h, lab), w in zip((synth, real, drawn), shares, strict=True)
        if len(h) and w > 0
    ]
    threads = torch.get_num_threads()
    if config.threads:
        torch.set_num_threads(config.threads)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        arch = unet.architecture(len(classes), config.channels, config.num_res_units)
        net = unet.build_model(arch)
    init = None
    if config.init_from:
        from radspatial.training.organs_init import warm_start

        init = warm_start(net, Path(config.init_from), classes)
    net = net.to(dev)
    t_train, cpu0 = time.perf_counter(), time.process_time()
    history, steps_done = _fit(net, banks, config, dev, progress, classes)
    train_s, cpu_s = time.perf_counter() - t_train, time.process_time() - cpu0
    torch.set_num_threads(threads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    unet.save_weights(net.cpu(), out, half=True)
    training = {
        "data_seconds": round(data_s, 1),
        "train_seconds": round(train_s, 1),
        "train_cpu_seconds": round(cpu_s, 1),  # process CPU time (shared machines: wall varies)
        "device": str(dev),
        "steps_done": steps_done,
        "threads": torch.get_num_threads(),
        "init": init,
        "loss_every_100_steps": [
            round(float(np.mean(history[i : i + 100])), 4) for i in range(0, len(history), 100)
        ],
    }
    record = _record(out, config, arch, classes, len(synth[0]), real_source, training)
    atomic_write_json(out / unet.CONFIG, record)
    return record


def _fit(
    net: Any, banks: list, config: OrgansConfig, dev: Any, progress: bool, classes: list
) -> tuple[list[float], int]:
    """Train ``net`` in place (``config.steps`` steps or until ``config.max_seconds``); the
    loss of every step and the steps done."""
    import torch

    from radspatial.training.organs_loss import masked_dice_ce

    weights = np.array([w for _, _, w in banks]) / sum(w for _, _, w in banks)
    phase = phase_table([n for _, n in classes], dev) if config.enhance else None
    gen = torch.Generator(device=dev).manual_seed(config.seed)
    rng = keyed_rng(config.seed, "organs-train")
    opt = torch.optim.AdamW(net.parameters(), lr=config.lr, weight_decay=1e-4)
    warm = min(0.5, max(0.05, 2 / config.steps))
    history: list[float] = []
    net.train()
    t_train = time.perf_counter()
    steps_done = config.steps
    for step in range(config.steps):
        elapsed = time.perf_counter() - t_train
        if config.max_seconds and elapsed > config.max_seconds:
            steps_done = step
            break
        # one-cycle (linear warm-up, cosine decay) over the steps or the time budget, whichever
        # runs out first: a run cut by --max-seconds still ends at a small learning rate
        frac = step / config.steps
        if config.max_seconds:
            frac = max(frac, elapsed / config.max_seconds)
        for group in opt.param_groups:
            group["lr"] = one_cycle_lr(config.lr, frac, warm)
        counts = rng.multinomial(config.batch_size, weights)
        parts = []
        for (h, lab, _), n in zip(banks, counts, strict=True):
            if n:
                idx = torch.from_numpy(rng.integers(0, len(h), n)).to(dev)
                parts.append((h[idx], lab[idx]))
        hu = torch.cat([p[0] for p in parts])
        lab = torch.cat([p[1] for p in parts])
        x, y = augment(
            hu, lab, gen, config.label_hu_jitter, config.wide_windows, config.elastic,
            config.elastic_px, config.enhance, phase,
        )  # fmt: skip
        opt.zero_grad(set_to_none=True)
        loss = masked_dice_ce(net(x), y)
        loss.backward()
        opt.step()
        history.append(float(loss.item()))
        if progress and (step % 100 == 0 or step == config.steps - 1):
            mean = float(np.mean(history[-100:]))
            print(
                f"step {step}/{config.steps} loss {mean:.4f} {time.perf_counter() - t_train:.0f}s",
                flush=True,
            )
    net.eval()
    return history, steps_done


def _record(
    out: Path,
    config: OrgansConfig,
    arch: dict[str, Any],
    classes: list[tuple[int, str]],
    n_synth: int,
    real_source: dict[str, Any],
    training: dict[str, Any],
) -> dict[str, Any]:
    """config.json: the model head, its data, weights hash and how it was trained."""
    import monai
    import torch

    return {
        **unet.config_head(FORMAT, arch, classes, config),
        "data": {
            "phantoms": {
                "n": config.n_phantoms,
                "shape": list(config.phantom_shape),
                "case_ids": (
                    f"organs_0000..organs_{config.n_phantoms - 1:04d}" if config.n_phantoms else ""
                ),
                "variants": ", ".join(config.phantom_variants) + " in turn",
                "slices": int(n_synth),
            },
            "real": real_source,
            "held_out_never_used": held_out(tuple(config.volumes)),
        },
        "weights": {"file": unet.WEIGHTS, "sha256": sha256_file(out / unet.WEIGHTS)},
        "training": {
            "command": "python -m radspatial.training.organs_train " + _args_text(config),
            **training,
        },
        "versions": {"torch": torch.__version__, "monai": monai.__version__},
    }


def _args_text(c: OrgansConfig) -> str:
    return (
        f"--n-phantoms {c.n_phantoms} --real-weight {c.real_weight} --steps {c.steps} "
        f"--batch-size {c.batch_size} "
        f"--lr {c.lr} --seed {c.seed} --size {c.size} --device {c.device} --workers {c.workers}"
        f" --label-hu-jitter {c.label_hu_jitter} --wide-windows {c.wide_windows}"
        f" --volumes {','.join(c.volumes)} --channels {','.join(map(str, c.channels))}"
        + (f" --enhance {c.enhance}" if c.enhance else "")
        + (f" --elastic {c.elastic} --elastic-px {c.elastic_px}" if c.elastic else "")
        + (f" --exclude {','.join(c.exclude)}" if c.exclude else "")
        + (f" --threads {c.threads}" if c.threads else "")
        + (f" --max-seconds {c.max_seconds:g}" if c.max_seconds else "")
        + (f" --init-from {c.init_from}" if c.init_from else "")
        + (
            f" --synth {','.join(c.synth)} --synth-weight {c.synth_weight}"
            f" --synth-draws {c.synth_draws} --synth-step-mm {c.synth_step_mm}"
            if c.synth
            else ""
        )
    )


def _csv(kind: type):
    return lambda text: tuple(kind(v) for v in text.split(",") if v)


def arguments(p: argparse.ArgumentParser) -> None:
    """``--out`` and every OrgansConfig field (``radspatial train organs``, ``python -m``)."""
    p.add_argument("--out", type=Path, required=True, help="model folder to write")
    d = OrgansConfig()
    p.add_argument("--real-weight", type=float, default=d.real_weight)
    p.add_argument("--n-phantoms", type=int, default=d.n_phantoms)
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--size", type=int, default=d.size)
    p.add_argument("--device", default=d.device)
    p.add_argument("--workers", type=int, default=d.workers)
    p.add_argument("--threads", type=int)
    p.add_argument("--max-seconds", type=float)
    p.add_argument("--mirror-real", action="store_true")
    p.add_argument("--label-hu-jitter", type=float, default=d.label_hu_jitter)
    p.add_argument("--wide-windows", type=float, default=d.wide_windows)
    p.add_argument("--enhance", type=float, default=d.enhance, help="share given a phase")
    p.add_argument("--elastic", type=float, default=d.elastic)
    p.add_argument("--elastic-px", type=float, default=d.elastic_px)
    p.add_argument("--exclude", type=_csv(str), default=d.exclude, help="e.g. a:86-97")
    p.add_argument("--init-from")
    p.add_argument("--synth", type=_csv(str), default=d.synth, help="e.g. a,amos,s0327,s0328,mr")
    p.add_argument("--synth-weight", type=float, default=d.synth_weight)
    p.add_argument("--synth-draws", type=int, default=d.synth_draws)
    p.add_argument("--synth-step-mm", type=float, default=d.synth_step_mm)
    p.add_argument("--volumes", type=_csv(str), default=d.volumes)
    p.add_argument("--channels", type=_csv(int), default=d.channels)


def run(args: argparse.Namespace) -> int:
    keep = OrgansConfig.__dataclass_fields__  # every flag but --out is a config field
    record = train_organs(
        args.out, OrgansConfig(**{k: v for k, v in vars(args).items() if k in keep})
    )
    print(f"organs: wrote {args.out} ({record['training']['train_seconds']} s training)")
    return 0


def main(argv: list[str] | None = None) -> int:
    arguments(p := argparse.ArgumentParser(description="train the shipped organs localizer"))
    return run(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
