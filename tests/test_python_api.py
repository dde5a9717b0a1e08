"""docs/python_api.md: its examples run as written; the top-level names are lazy."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "python_api.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_doc_examples_run(tmp_path, monkeypatch, capsys):
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(tmp_path)
    blocks = _blocks()
    assert len(blocks) >= 4
    namespace: dict = {"__name__": "python_api_doc"}
    for n, code in enumerate(blocks):
        exec(compile(code, f"{DOC.name}[block {n}]", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "baseline:yes 50.0%" in out
    assert (tmp_path / "report" / "index.html").is_file()
    assert (tmp_path / "bench_hf" / "README.md").is_file()
    assert (tmp_path / "probe_run" / "results.json").is_file()


def test_import_is_lazy_and_api_names_survive_submodule_imports():
    code = (
        "import sys, radspatial\n"
        "assert 'numpy' not in sys.modules and 'radspatial.api' not in sys.modules\n"
        "from radspatial.reports.build import build_report\n"
        "from radspatial.bench.generate import GenerateConfig\n"
        "import radspatial.reports.build\n"
        "assert callable(radspatial.report) and radspatial.report.__module__ == 'radspatial.api'\n"
        "assert radspatial.generate.__module__ == 'radspatial.api'\n"
        "assert sys.modules['radspatial.reports.build'].build_report is build_report\n"
        "assert set(radspatial.__all__) <= set(dir(radspatial))\n"
        "for name in radspatial.__all__: getattr(radspatial, name)\n"
        "print('ok')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stderr
    import radspatial

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        radspatial.nope  # noqa: B018


def test_api_functions_are_typed_and_documented():
    import inspect

    import radspatial

    for name in ("generate", "evaluate", "report", "export_hf"):
        fn = getattr(radspatial, name)
        assert fn.__doc__ and len(fn.__doc__) > 60, name
        sig = inspect.signature(fn)
        assert sig.return_annotation is not inspect.Signature.empty, name
        params = [p for p in sig.parameters.values() if p.kind is not p.VAR_KEYWORD]
        assert all(p.annotation is not inspect.Parameter.empty for p in params), name
