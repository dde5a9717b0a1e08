"""The browsable report (``index.html``): the tables and figures of ``summary.md`` plus an item
gallery with filters, as one static HTML file with a little JavaScript (no server, no network).

The gallery shows each item once: its image (linked or copied into ``images/`` of the report
folder, so the folder is self-contained), the
question, the expected answer in the three frames, and every model's reply in run 0 with the
parsed answer of each run. Filters: setup, marker, question type, variant, and "models
disagree" (the models' run-0 answers differ) or "some model wrong".

Human review: each model's run-0 reply has three buttons (correct / incorrect / ambiguous); the
marks are kept in the browser (localStorage, per report) and "Download marks" saves them as
JSONL in the schema ``radspatial report --review marks.jsonl`` reads (docs/open_questions.md):
``{"id", "run", "model", "mark", "reviewer", "time"}``. The automatic grade is never changed.

Example:
    >>> write_index(summary, figures, runs, Path("report"), markdown)  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radspatial.core.io import place_file
from radspatial.core.records import ResultRow, read_results
from radspatial.core.safepath import linkable
from radspatial.grading.rows import answer_text

MAX_REPLY_CHARS = 20_000  # per reply shown: 500 one-MB replies must not make a 500 MB page
MAX_ITEMS = 3000  # gallery cap: beyond it, a spread over setup/marker/question type is shown
FILTERS = (  # data attribute, label
    ("setup", "Setup"),
    ("marker", "Marker"),
    ("qtype", "Question type"),
    ("variant", "Variant"),
    ("transform", "View (rotation/flip)"),
)
_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1400px;padding:0 16px;color:#222}
h1,h2,h3{font-weight:600}table{border-collapse:collapse;margin:8px 0 16px;font-size:12px}
th,td{border:1px solid #ccc;padding:3px 5px;text-align:right;white-space:nowrap}
th{background:#f2f2f2;white-space:normal}td:first-child{white-space:normal;max-width:14em;
overflow-wrap:anywhere}
td:first-child,th:first-child{text-align:left}img.fig{max-width:100%;border:1px solid #eee}
nav a{margin-right:12px}#filters{position:sticky;top:0;background:#fff;padding:8px 0;z-index:1;
border-bottom:1px solid #ddd}#filters label{margin-right:14px}
#gallery{display:grid;grid-template-columns:repeat(auto-fill,minmax(330px,1fr));gap:12px}
.item{border:1px solid #ccc;border-radius:6px;padding:8px}.item img{width:100%;height:auto}
.q{font-weight:600;margin:6px 0}.exp{color:#444;font-size:13px}.id{color:#777;font-size:12px}
.reply{border-top:1px solid #eee;margin-top:6px;padding-top:4px;font-size:13px}
.ok{color:#1a7f37}.bad{color:#c62828}.none{color:#777}
details pre{white-space:pre-wrap;word-break:break-word;background:#f7f7f7;padding:4px;margin:2px 0}
.scroll{overflow-x:auto;max-width:100%}.mk{font-weight:600;margin-left:2px}
.missing{background:#eee;color:#777;padding:40px 0;text-align:center}
.rv button{font-size:11px;padding:0 5px;margin-left:3px;border:1px solid #bbb;background:#fafafa;
border-radius:3px;cursor:pointer}.rv button.on{background:#333;color:#fff}
#review{margin-left:14px}#review input{width:90px}
"""
_JS = """
const sel = {};
document.querySelectorAll('#filters select').forEach(s => { sel[s.name] = s; });
const agree = document.getElementById('f-disagree'), wrong = document.getElementById('f-wrong');
const cards = Array.from(document.querySelectorAll('#gallery .item'));
const count = document.getElementById('count');
function apply() {
  let shown = 0;
  for (const c of cards) {
    let ok = Object.entries(sel).every(([k, s]) => !s.value || c.dataset[k] === s.value);
    if (agree.checked && c.dataset.disagree !== '1') ok = false;
    if (wrong.checked && c.dataset.wrong !== '1') ok = false;
    c.hidden = !ok;
    if (ok) shown += 1;
  }
  count.textContent = shown + ' of ' + cards.length + ' items shown';
}
Object.values(sel).forEach(s => s.addEventListener('change', apply));
agree.addEventListener('change', apply); wrong.addEventListener('change', apply);
apply();
// human review: marks per (model, id, run 0), kept in localStorage, downloaded as JSONL
const store = 'radspatial-review:' + document.body.dataset.report;
function load() {
  try { return JSON.parse(localStorage.getItem(store) || '{}'); } catch (e) { return {}; }
}
function save() { try { localStorage.setItem(store, JSON.stringify(marks)); } catch (e) {} }
const marks = load();
const who = document.getElementById('reviewer'), nMarks = document.getElementById('n-marks');
function show() {
  document.querySelectorAll('.rv').forEach(rv => {
    const m = marks[rv.dataset.model + '|' + rv.dataset.id];
    rv.querySelectorAll('button').forEach(b => b.classList.toggle('on', !!m && m.mark === b.value));
  });
  nMarks.textContent = Object.keys(marks).length + ' marked';
}
document.querySelectorAll('.rv button').forEach(b => b.addEventListener('click', () => {
  const rv = b.parentElement, key = rv.dataset.model + '|' + rv.dataset.id;
  if (marks[key] && marks[key].mark === b.value) delete marks[key];
  else marks[key] = {id: rv.dataset.id, run: 0, model: rv.dataset.model, mark: b.value,
                     reviewer: who.value || undefined, time: new Date().toISOString()};
  save(); show();
}));
document.getElementById('download').addEventListener('click', () => {
  const nl = String.fromCharCode(10);
  const text = Object.values(marks).map(m => JSON.stringify(m)).join(nl) + nl;
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob([text], {type: 'application/jsonl'}));
  a.download = 'marks.jsonl'; a.click();
});
show();
"""


# ---------------------------------------------------------------- markdown subset -> HTML


def _inline(text: str) -> str:
    """Code spans and bold; a backslash-escaped character (``core.textsafe.md_text``) stays a
    literal character, never markup."""
    escaped: list[str] = []

    def hold(m: re.Match) -> str:
        escaped.append(m.group(1))
        return f"\ue000{len(escaped) - 1}\ue001"

    out = html.escape(re.sub(r"\\([\\`*\[\]<>|!_#~])", hold, text), quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)
    return re.sub(r"\ue000(\d+)\ue001", lambda m: html.escape(escaped[int(m.group(1))]), out)


def _cells(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip()[1:-1])
    return [c.strip().replace("\\|", "|") for c in cells]


def markdown_to_html(md: str) -> str:
    """The subset ``summary.md`` uses: headings, paragraphs, pipe tables, figures."""
    out: list[str] = []
    blocks = re.split(r"\n\s*\n", md.strip())
    for block in blocks:
        lines = block.strip().splitlines()
        first = lines[0]
        if first.startswith("#"):
            level = len(first) - len(first.lstrip("#"))
            out.append(f"<h{level}>{_inline(first[level:].strip())}</h{level}>")
            lines = lines[1:]
            if not lines:
                continue
            first = lines[0]
        if first.startswith("|"):
            rows = [_cells(x) for x in lines if x.startswith("|")]
            head, body = rows[0], rows[2:]
            parts = ["<table><thead><tr>"]
            parts += [f"<th>{_inline(c)}</th>" for c in head]
            parts.append("</tr></thead><tbody>")
            for row in body:
                parts.append("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in row) + "</tr>")
            out.append('<div class="scroll">' + "".join(parts) + "</tbody></table></div>")
            rest = [x for x in lines if not x.startswith("|")]
            if rest:
                out.append(f"<p>{_inline(' '.join(rest))}</p>")
            continue
        # figures: only the report's own PNGs, by a plain file name (never a URL or a path)
        figure = re.fullmatch(r"!\[([^\]]*)\]\(([\w.\-]+\.png)\)", first.strip())
        if figure and len(lines) == 1:
            alt, src = (html.escape(g) for g in figure.groups())
            out.append(f'<p><img class="fig" src="{src}" alt="{alt}"></p>')
            continue
        out.append(f"<p>{_inline(' '.join(lines))}</p>")
    return "\n".join(out)


# ---------------------------------------------------------------- gallery


def _rows(run_dir: Path) -> list[ResultRow]:
    path = run_dir / "results.jsonl"
    return read_results(path) if path.is_file() else []


def gallery_items(
    labels: Sequence[str], run_dirs: Sequence[Path], roots: Sequence[Path | None] | None = None
) -> list[dict[str, Any]]:
    """One record per item id (RQ1, RQ2, RQ3, then AS; by id within): its fields (from the
    first run that has it) and per model the run-0 reply and every run's parsed answer."""
    items: dict[str, dict[str, Any]] = {}
    roots = list(roots) if roots is not None else [None] * len(run_dirs)
    for label, run_dir, root in zip(labels, run_dirs, roots, strict=True):
        for row in _rows(Path(run_dir)):
            item = items.setdefault(row.id, {"row": row, "models": {}, "root": root})
            model = item["models"].setdefault(label, {"runs": {}})
            said = answer_text(row.kind, row.parsed)
            model["runs"][row.run] = (row.parsed, row.correct, row.error, said)
            if row.run == 0 or "reply" not in model:
                model.update(reply=row.reply, error=row.error)
    return [items[k] for k in sorted(items, key=lambda k: (_setup_rank(items[k]["row"]), k))]


def _setup_rank(row: ResultRow) -> int:
    """RQ1-RQ3 (CT images) before the blank-image ablation."""
    order = ("rq1", "rq2", "rq3", "as")
    return order.index(row.setup) if row.setup in order else len(order)


def _spread(items: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """At most ``n`` items, taken round-robin over (setup, marker, question type) groups."""
    if len(items) <= n:
        return items
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for it in items:
        r = it["row"]
        groups.setdefault((r.setup, r.marker, r.question_type), []).append(it)
    keep: list[dict[str, Any]] = []
    queues = [groups[k] for k in sorted(groups, key=str)]
    depth = 0
    while len(keep) < n:
        keep += [q[depth] for q in queues if depth < len(q)][: n - len(keep)]
        depth += 1
    ids = {id(it) for it in keep}
    return [it for it in items if id(it) in ids]


def _image_src(image: str | None, out: Path, root: Path | None) -> str | None:
    """The item's image as a path inside the report folder (``images/<source>/<file>``,
    hard-linked, or copied across file systems), so the folder opens anywhere on its own; only
    an image that is a file inside its run's dataset (nothing else is linked or probed)."""
    path = linkable(root, image)
    if path is None:
        return None
    if not path.is_absolute():
        path = Path.cwd() / path
    path = path.resolve()
    rel = f"images/{hashlib.sha256(str(path.parent).encode()).hexdigest()[:10]}/{path.name}"
    place_file(path, Path(out) / rel)
    return rel


def _expected_line(r: ResultRow) -> str:
    """The expected answer in the three frames: yes/no, or the answer's words or number."""
    frames = [r.expected, r.expected_standard, r.expected_anatomical]
    a, b, c = (html.escape(answer_text(r.kind, v)) for v in frames)
    return f"expected: image <b>{a}</b> · standard view <b>{b}</b> · anatomical <b>{c}</b>"


def _run_mark(run: tuple[Any, Any, Any, str]) -> str:
    """One run's answer as the model gave it (yes/no, or the word or number; "–" when none
    could be read: ``grading.rows.answer_text``) and, apart from it, ✓ right or ✗ wrong; E a
    failed call."""
    _, ok, err, said = run
    if err:
        return '<span class="none">E</span>'
    cls, mark = ("ok", "✓") if ok else ("bad", "✗")
    return f'<span class="{cls}">{html.escape(said)}<span class="mk">{mark}</span></span>'


def _review_buttons(model: str, item_id: str) -> str:
    esc = html.escape
    buttons = "".join(
        f'<button type="button" value="{v}" title="{v}">{t}</button>'
        for v, t in (("correct", "✓"), ("incorrect", "✗"), ("ambiguous", "?"))
    )
    return f'<span class="rv" data-model="{esc(model)}" data-id="{esc(item_id)}">{buttons}</span>'


def _card(item: dict[str, Any], labels: Sequence[str], out: Path) -> tuple[str, dict[str, str]]:
    r = item["row"]
    esc = html.escape
    src = _image_src(r.image, out, item.get("root"))
    img = (
        f'<img loading="lazy" src="{esc(src)}" alt="{esc(r.id)}">'
        if src
        else f'<div class="missing">image not found: {esc(str(r.image))}</div>'
    )
    expected = _expected_line(r)
    replies, answers, wrong = [], set(), False
    for label in labels:
        m = item["models"].get(label)
        if m is None:
            replies.append(f'<div class="reply"><b>{esc(label)}</b>: not evaluated</div>')
            continue
        runs = [m["runs"][k] for k in sorted(m["runs"])]
        marks = [_run_mark(run) for run in runs]
        p0 = m["runs"].get(0, runs[0])
        answers.add(p0[0] if not p0[2] else "error")
        wrong = wrong or (not p0[2] and not p0[1])
        text = m.get("error") if m.get("reply") is None else m.get("reply")
        text = "" if text is None else str(text)
        short = esc(text[:160] + ("…" if len(text) > 160 else ""))
        whole = text[:MAX_REPLY_CHARS] + (
            f"\n… ({len(text)} characters; the rest is in results.jsonl)"
            if len(text) > MAX_REPLY_CHARS
            else ""
        )
        body = f"<details><summary>{short}</summary><pre>{esc(whole)}</pre></details>"
        review = _review_buttons(label, r.id)
        replies.append(
            f'<div class="reply"><b>{esc(label)}</b>: {" ".join(marks) or "–"}{review}{body}</div>'
        )
    data = {
        "setup": str(r.setup or ""),
        "marker": str(r.marker or ""),
        "qtype": str(r.question_type or ""),
        "variant": str(r.variant or ""),
        "transform": str(r.transform or ""),
        "disagree": "1" if len(answers) > 1 else "0",
        "wrong": "1" if wrong else "0",
    }
    attrs = " ".join(f'data-{k}="{esc(v)}"' for k, v in data.items())
    meta = f"{r.setup} · {r.marker} · {r.question_type} · {r.variant}"
    if r.transform:
        meta += f" · {r.transform}"
    card = (
        f'<div class="item" {attrs}>{img}<div class="id">{esc(r.id)} — {esc(meta)}</div>'
        f'<div class="q">{esc(str(r.question))}</div><div class="exp">{expected}</div>'
        f"{''.join(replies)}</div>"
    )
    return card, data


def _filters(values: dict[str, set[str]]) -> str:
    parts = ['<div id="filters">']
    for key, label in FILTERS:
        opts = "".join(
            f'<option value="{html.escape(v)}">{html.escape(v)}</option>'
            for v in sorted(values.get(key, ()))
            if v  # "" is "all" (blank AS images have no rotation/flip code)
        )
        parts.append(
            f'<label>{label} <select name="{key}"><option value="">all</option>'
            f"{opts}</select></label>"
        )
    parts.append(
        '<label><input type="checkbox" id="f-disagree"> models disagree</label>'
        '<label><input type="checkbox" id="f-wrong"> some model wrong</label>'
        '<span id="count"></span><span id="review">review: <input id="reviewer" '
        'placeholder="your name"> <span id="n-marks"></span> <button type="button" '
        'id="download">Download marks (JSONL)</button></span></div>'
    )
    return "".join(parts)


def render_html(
    markdown: str,
    labels: Sequence[str],
    run_dirs: Sequence[Path],
    out: Path,
    *,
    roots: Sequence[Path | None] | None = None,
    max_items: int = MAX_ITEMS,
    final: Path | None = None,
) -> str:
    """The whole ``index.html`` as text, its images placed in ``out``; ``roots``: each run's
    dataset folder (images are linked only from inside it); ``final``: where ``out`` will be
    renamed to (the page's review-marks key), default ``out``."""
    items = gallery_items(labels, run_dirs, roots)
    shown = _spread(items, max_items)
    cards, values = [], {k: set() for k, _ in FILTERS}
    for item in shown:
        card, data = _card(item, labels, out)
        cards.append(card)
        for key in values:
            values[key].add(data[key])
    note = (
        f"<p>{len(shown)} of {len(items)} items shown (spread over setups, markers and "
        "question types).</p>"
        if len(shown) < len(items)
        else ""
    )
    legend = (
        "<p>Each item: the image as the model saw it, the question, the expected answer in "
        "the image, standard-view and anatomical frames, and per model and run the answer as "
        "read from its reply (yes/no, or the word or number of an open question; – when none "
        'could be read) with its grade apart: <span class="ok">✓ right</span>, '
        '<span class="bad">✗ wrong</span>, E = failed call. Click a reply to read it whole '
        "(run 0's reply is shown).</p>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>radspatial report</title><style>{_CSS}</style></head>"
        f'<body data-report="{html.escape(str(Path(final or out).resolve()))}">'
        '<nav><a href="#tables">Tables</a><a href="#gallery-section">Item gallery</a></nav>'
        f'<section id="tables">{markdown_to_html(markdown)}</section>'
        f'<section id="gallery-section"><h2>Item gallery</h2>{legend}{note}'
        f'{_filters(values)}<div id="gallery">{"".join(cards)}</div></section>'
        f"<script>{_JS}</script></body></html>\n"
    )
