"""``radspatial eval``, ``report`` and ``spar-table``: runs of models on a dataset, and their
report; each command's options are its job spec's (``eval/job.EvalJob``,
``reports/job.ReportJob`` / ``SparTableJob``), as the Python API takes them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from radspatial.cli.common import Command
from radspatial.core.jobspec import add_arguments, caller_terms, from_namespace
from radspatial.eval.job import EvalJob
from radspatial.reports.job import ReportJob, SparTableJob


def _eval_arguments(p: argparse.ArgumentParser) -> None:
    add_arguments(p, EvalJob)


def cmd_eval(args: argparse.Namespace) -> int:
    import shlex
    from functools import partial

    from radspatial.cli import eval_options as opts
    from radspatial.eval.job import eval_config
    from radspatial.eval.prompts import load_template
    from radspatial.eval.runguard import sigterm_as_interrupt
    from radspatial.eval.runner import run_eval

    specs = list(dict.fromkeys(args.model))
    if len(specs) != len(args.model):
        raise ValueError("--model: the same spec is given twice")
    for spec in specs:  # every model's backend options checked before anything runs
        opts.backend_options(args, spec)
    template = load_template(args.prompt) if args.prompt else None
    out_dirs = {s: args.out if len(specs) == 1 else opts.run_dir_for(args.out, s) for s in specs}
    if len(set(out_dirs.values())) != len(specs):
        raise ValueError("--model: two specs map to the same run folder name")
    configs = {}
    for spec in specs:
        job = from_namespace(EvalJob, args, model=spec, out=out_dirs[spec])
        with caller_terms(EvalJob, "cli"):
            configs[spec] = eval_config(job, template)
    opts.show_retries()
    n_err, errors = 0, []
    for i, spec in enumerate(specs):
        # said once the backend is open: a refused spec gets its one error line alone
        note = partial(
            opts.note_remote,
            [spec],
            args.judge if i == 0 else None,
            {spec: configs[spec].backend_options},
        )
        with sigterm_as_interrupt():
            try:
                rows = run_eval(args.data, out_dirs[spec], configs[spec], on_open=note)
            except (PermissionError, IsADirectoryError, NotADirectoryError) as exc:
                raise ValueError(f"{exc.filename}: {exc.strerror}") from None
        n_err += _print_eval(out_dirs[spec], rows)
        errors += [str(r["error"]) for r in rows if r.get("error")]
    if len(specs) > 1:
        from radspatial.reports.build import build_report

        report = build_report(list(out_dirs.values()), args.out / "report")
        print(f"report: {report.index_html}")
    if n_err:
        from radspatial.eval.hints import failure_hint

        keyed = bool(args.api_key_env) or any(s.startswith("openai:") for s in specs)
        hint = failure_hint(errors, keyed=keyed)
        again = shlex.join(["radspatial", *getattr(args, "argv", ["eval", "..."])])
        where = args.out / "results.jsonl" if len(specs) == 1 else "each run's results.jsonl"
        print(
            f"radspatial eval: {n_err} call(s) failed after retries (errors, not wrong answers; "
            f"see {where}); {hint.text}" + (f": {again}" if hint.rerun else ""),
            file=sys.stderr,
        )
        return 3
    return 0


def _print_eval(out: Path, rows: list[dict], scope: str | None = None) -> int:
    """Print the run's summary; returns the number of errors (calls without an answer).
    ``scope``: what the items are when not all of them (the demo's oracle skips AS items)."""
    import json

    from radspatial.core.records import error_count

    metrics = json.loads((out / "metrics.json").read_text())
    o = metrics["overall"]
    n_err = error_count(metrics)
    if o.get("accuracy_mean") is None:
        print(f"{metrics['model']}: no answered calls (errors {n_err} of {metrics['n_rows']})")
    else:
        items = f"{o['n_items']} items (all question types and setups)"
        items = f"{scope} (all question types)" if scope else items
        print(
            f"{metrics['model']}: accuracy {100 * o['accuracy_mean']:.1f} +- "
            f"{100 * (o['accuracy_std'] or 0):.1f}% over {o['runs']} run(s) of "
            f"{items}, invalid {100 * o['invalid_rate']:.1f}% (same "
            f"items: abstentions and unreadable replies), errors {n_err} (not counted in accuracy)"
        )
    if line := _decidable_line(metrics.get("by_decidable")):
        print(line)
    h = metrics.get("headline") or {}
    if h.get("accuracy_mean") is not None and h.get("n_items") != o.get("n_items"):
        print(
            f"  relative position RQ1-RQ3 (MIRP's overall): {100 * h['accuracy_mean']:.1f} +- "
            f"{100 * (h['accuracy_std'] or 0):.1f}% of {h['n_items']} items, invalid "
            f"{100 * (h.get('invalid_rate') or 0):.1f}% of those"
        )
    from radspatial.eval.rq1_plain import plain_rq1_line

    if line := plain_rq1_line(metrics.get("rq1_plain")):
        print(line)
    _print_cost(metrics.get("usage"))
    _print_judge(metrics.get("judge"))
    _print_errors(rows)
    print(f"results: {out / 'results.jsonl'}")
    return n_err


def _decidable_line(groups: dict | None) -> str | None:
    """Accuracy on the items the image decides and on those it does not, each with n and its
    Wilson 95% interval (all runs' answers pooled)."""
    if not groups:
        return None
    parts = []
    for key in ("decidable", "undecidable"):
        g = groups.get(key) or {}
        if g.get("accuracy_mean") is None:
            continue
        ci = f"[{100 * g['ci_low']:.1f}, {100 * g['ci_high']:.1f}]"
        parts.append(f"{key} {100 * g['accuracy_mean']:.1f}% {ci} of {g['n_items']} items")
    if not parts:
        return None
    honest = " (undecidable: the image cannot tell; an honest reader scores 50%)"
    return "  by what the image decides: " + "; ".join(parts) + (honest if len(parts) > 1 else "")


def _print_cost(usage: dict | None) -> None:
    """With ``--price``: the run's cost on the console (not only in metrics.json)."""
    if not usage or not usage.get("price"):
        return
    if usage.get("cost_usd") is None:
        print("  cost: unknown (no call reported token counts)")
        return
    print(
        f"  cost: {usage['cost_usd']:.4f} USD ({usage.get('prompt_tokens', 0):,} prompt + "
        f"{usage.get('completion_tokens', 0):,} completion tokens)"
    )


def _print_judge(judge: dict | None) -> None:
    """The judge's share and its failures, on the console (not only in judge.json)."""
    if not judge:
        return
    failed, n = judge.get("n_judge_failed") or 0, judge.get("n_judged") or 0
    line = f"  judge {judge.get('judge')}: {n} open answer(s) judged, {failed} call(s) failed"
    if failed:
        line += " (those keep the rules' grade; rerun the command to ask again)"
    print(line, file=sys.stderr if failed else sys.stdout)


def _print_errors(rows: list[dict]) -> None:
    """The commonest failed-call messages (a 401 from a keyed server, a timeout), on stderr."""
    from collections import Counter

    from radspatial.core.textsafe import log_text

    seen = Counter(log_text(str(r["error"])[:200]) for r in rows if r.get("error"))
    for message, n in seen.most_common(3):
        print(f"  error in {n} call(s): {message}", file=sys.stderr)


def _report_arguments(p: argparse.ArgumentParser) -> None:
    add_arguments(p, ReportJob)


def cmd_report(args: argparse.Namespace) -> int:
    from radspatial.core.progress import heartbeat
    from radspatial.reports.job import run_report

    job = from_namespace(ReportJob, args)
    with heartbeat("report") as note, caller_terms(ReportJob, "cli"):
        summary = run_report(job, log=note)
    print(f"report: {summary.summary_md}")
    print(f"html: {summary.index_html}")
    for fig in summary.figures:
        print(f"figure: {fig}")
    if summary.missing_images:  # said, not only greyed out in the gallery
        where = "not found in the dataset folder their run.json names (moved or deleted?)"
        print(f"warning: {summary.missing_images} gallery item(s) show no image: {where}",
              file=sys.stderr)  # fmt: skip
    return 0


def _spar_table_arguments(p: argparse.ArgumentParser) -> None:
    add_arguments(p, SparTableJob)


def cmd_spar_table(args: argparse.Namespace) -> int:
    from radspatial.reports.job import run_spar_table

    with caller_terms(SparTableJob, "cli"):
        md = run_spar_table(from_namespace(SparTableJob, args))
    print(md.read_text(), end="")
    print(f"table: {md}")
    return 0


COMMANDS = (
    Command(
        "eval",
        "evaluate one or more models on a dataset (radspatial or MIRP layout)",
        "Model specs: openai:<model>, openai-compat:<model>@<base_url>, "
        "hf:<path or id>, vllm:<path or id>, "
        "baseline:random|yes|no|anatomy-prior|standard-view[@dataset], "
        "agent:<localizer> with localizer one of {localizers} (agent:unet@<model_dir>). "
        "Rerunning the same command resumes: finished calls are never repeated.",
        _eval_arguments,
        cmd_eval,
        localizers=True,
    ),
    Command(
        "report",
        "tables, figures and a browsable HTML report from one or more eval run folders",
        "Writes summary.md, summary.json, the figures and index.html (tables, "
        "figures and an item gallery with filters; open it in a browser, no server needed).",
        _report_arguments,
        cmd_report,
    ),
    Command(
        "spar-table",
        "SPAR-VQA over dataset seeds as SPAR-Bench's Table 2: mean +- std per type and macro",
        "One run per seed and model (radspatial generate --questions spar --seed S, then "
        "radspatial eval); accuracy per type averaged over each run's repeats.",
        _spar_table_arguments,
        cmd_spar_table,
    ),
)
