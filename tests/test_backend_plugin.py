"""A backend is one module: a backend defined outside the package (written to a temporary
folder, imported from there) answers a real eval run through the command line and the Python
API. Its options are its factory's keyword parameters (``--model-args`` is checked against
them, one line naming the option and the backend); its traits (Ray, oracles, remote) are what it
declares when it registers, and the command line, the runner and the report read them."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

import radspatial
from radspatial.bench.dataset import build_dataset
from radspatial.bench.generate import GenerateConfig
from radspatial.cli import bundled_example, main
from radspatial.core.io import read_jsonl
from radspatial.imaging.volumes import Case
from radspatial.models.base import BACKENDS, is_oracle, is_remote, list_backends
from radspatial.models.options import MODEL_ARGS_HELP, backend_contract

# the whole recipe: one module, one factory; nothing in radspatial names it
PLUGIN = '''
"""A backend that answers every request with one fixed reply (a recipe, not a model)."""

from typing import Annotated

from radspatial.models.base import Reply, register_backend
from radspatial.models.options import Opt, at_least


class Fixed:
    deterministic = True  # every run answers an item the same

    def __init__(self, spec, reply, repeat):
        self.spec, self.reply, self.repeat = spec, reply, repeat

    def describe(self):
        return {"spec": self.spec, "backend": "fixed", "reply": self.reply, "repeat": self.repeat}

    def generate(self, requests, on_reply):
        for request in requests:
            on_reply(request, Reply(text=" ".join([self.reply] * self.repeat)))


@register_backend("fixed", oracles=("truth",))
def create_fixed(
    rest: str,
    *,
    decoding,
    concurrency: int = 1,
    reply: str = "yes",
    repeat: Annotated[int, Opt(check=at_least(1))] = 1,
):
    """``fixed`` or ``fixed:<name>``; options: reply (the text), repeat (times, >= 1)."""
    return Fixed("fixed:" + rest if rest else "fixed", reply, repeat)


def _far(rest):  # a relay whose spec says where it sends the items
    return not rest.startswith("here")


@register_backend("relay", remote=_far)
def create_relay(rest: str, *, decoding, concurrency: int = 1):
    """``relay:<where>``: answers "no" as if a server at <where> had (a recipe, no network)."""
    return Fixed("relay:" + rest, "no", 1)
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugin")
    (folder / "fixed_backend.py").write_text(PLUGIN)
    spec = importlib.util.spec_from_file_location("fixed_backend", folder / "fixed_backend.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["fixed_backend"] = module
    spec.loader.exec_module(module)  # registers "fixed"
    yield module
    BACKENDS.remove("fixed")
    BACKENDS.remove("relay")
    del sys.modules["fixed_backend"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("plugin_ds") / "ds"
    ct, seg = bundled_example()
    config = GenerateConfig(size=96, setups=("rq1", "as"), as_count=2)
    build_dataset([Case("ex", ct, seg)], config, out, log=lambda _: None)
    return out


def test_a_backend_module_answers_an_eval_run(plugin, data, tmp_path, capsys):
    assert "fixed" in list_backends()
    options, any_key = backend_contract("fixed")
    assert [(o.key, o.kind) for o in options] == [("reply", str), ("repeat", int)]
    assert not any_key
    out = tmp_path / "cli"
    argv = ["eval", "--data", str(data), "--model", "fixed", "--out", str(out), "--runs", "1"]
    assert main([*argv, "--model-args", "reply=no"]) == 0
    rows = list(read_jsonl(out / "results.jsonl"))
    assert rows and {r["reply"] for r in rows} == {"no"}  # every item answered by the plugin
    assert {r["parsed"] for r in rows if r["setup"] != "as"} == {0}
    run = json.loads((out / "run.json").read_text())
    assert run["backend"]["reply"] == "no" and run["backend"]["repeat"] == 1
    # the Python API takes the same options
    api = radspatial.evaluate(data, "fixed", tmp_path / "api", runs=1, model_args={"repeat": 2})
    assert {r["reply"] for r in read_jsonl(api.out / "results.jsonl")} == {"yes yes"}
    capsys.readouterr()


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (["--model-args", "colour=red"], "fixed: --model-args colour is not an option here "
         "(known: reply, repeat)"),
        (["--model-args", "repeat=0"], "repeat must be an integer >= 1, got 0"),
        (["--model-args", "repeat=two"], "--repeat / repeat= must be a number, got 'two'"),
        (["--timeout", "5"], "fixed: --timeout applies to openai/openai-compat models only"),
        (["--executor", "ray"], "fixed: --executor ray applies to hf/vllm models only"),
    ],
)  # fmt: skip
def test_a_plugin_backend_refuses_what_it_does_not_take(plugin, data, tmp_path, capsys, extra, why):
    out = tmp_path / "refused"
    argv = ["eval", "--data", str(data), "--model", "fixed", "--out", str(out), *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and why in err
    assert not out.exists()


def test_traits_are_read_from_the_backend_not_from_names(plugin):
    assert is_oracle("fixed:truth") and not is_oracle("fixed:other")
    assert is_oracle("openai-compat:fixed:truth@http://127.0.0.1:1/v1")  # served behind HTTP
    assert is_oracle("agent:mask") and is_oracle("baseline:standard-view@bench")
    assert not is_oracle("agent:markers") and not is_oracle("hf:/models/x")


def test_remote_is_a_trait_the_backend_declares_per_spec(plugin, data, tmp_path, capsys):
    """Whether a run sends the items off this machine is the backend's ``remote`` trait (here a
    function of the spec), read by the command line's note and run.json; no name or URL check."""
    assert is_remote("relay:far.example") and not is_remote("relay:here")
    assert not is_remote("fixed") and not is_remote("fixed:truth")
    assert is_remote("openai:gpt-4o") and not is_remote("hf:/models/x")
    assert not is_remote("openai-compat:m@http://127.0.0.1:9/v1")
    assert is_remote("openai-compat:m@https://api.example.org/v1")
    for where, remote in (("far.example", True), ("here", False)):
        out = tmp_path / where
        argv = ["eval", "--data", str(data), "--model", f"relay:{where}", "--out", str(out)]
        assert main([*argv, "--runs", "1", "--judge", "fixed"]) == 0
        err = capsys.readouterr().err
        assert ("relay:far.example sends the dataset's images" in err) is remote, err
        assert "fixed sends" not in err
        run = json.loads((out / "run.json").read_text())
        assert run.get("remote") is (True if remote else None)
        assert "judge_remote" not in run
    api = radspatial.evaluate(data, "fixed", tmp_path / "api", runs=1, judge="relay:far")
    assert json.loads((api.out / "run.json").read_text())["judge_remote"] is True
    assert "remote" not in json.loads((api.out / "run.json").read_text())


def test_the_help_names_what_each_builtin_factory_takes():
    """MODEL_ARGS_HELP is static text (the CLI builds its help without importing the
    backends); it must name every option each built-in factory declares."""
    for prefix in ("hf", "openai", "openai-compat"):
        options, any_key = backend_contract(prefix)
        assert options and not any_key
        for option in options:
            assert option.key in MODEL_ARGS_HELP, (prefix, option.key)
    assert backend_contract("vllm") == ([], True)  # any vllm.LLM argument, as given
    assert backend_contract("baseline") == ([], False)
