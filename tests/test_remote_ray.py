"""The ``remote`` record covers Ray (issue 35): ``hf:``/``vllm:`` under ``--executor ray`` with
a cluster address that is not this machine send the items to the cluster's machines, and the
stderr note and run.json say so; a local Ray (no address, ``local``, a loopback host) does not.
Ray is never started: the ``ray`` executor is replaced by one that answers here."""

from __future__ import annotations

import json

import pytest

from radspatial import api
from radspatial.cli import main
from radspatial.models.base import (
    REMOTE_BACKENDS,
    create_backend,
    is_remote,
    ray_sends_off,
    remote_provenance,
)


@pytest.mark.parametrize(
    ("address", "env", "remote"),
    [
        (None, None, False),  # a Ray started on this machine
        ("local", None, False),
        ("127.0.0.1:6379", None, False),
        ("ray://localhost:10001", None, False),
        ("ray://[::1]:10001", None, False),
        ("ray://head:10001", None, True),
        ("10.0.0.5:6379", None, True),
        ("auto", None, True),  # the running cluster it finds may have other nodes
        (None, "ray://head.example:10001", True),  # what Ray itself reads
        (None, "127.0.0.1:6379", False),
    ],
)
def test_a_ray_address_off_this_machine_is_remote(monkeypatch, address, env, remote):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if env:
        monkeypatch.setenv("RAY_ADDRESS", env)
    assert ray_sends_off(address) is remote
    ray = {"executor": "ray", "address": address}
    assert is_remote("hf:/models/x", ray) is remote
    assert remote_provenance("vllm:/models/x", None, ray) == ({"remote": True} if remote else {})
    assert not is_remote("hf:/models/x", {"executor": "local", "address": address})
    assert not is_remote("hf:/models/x")


@pytest.fixture
def ray_here():
    """The ``ray`` executor replaced by one that answers every item "yes" on this machine."""
    real = REMOTE_BACKENDS.remove("ray")
    seen = []

    def here(spec, *, decoding, **options):
        seen.append(options)
        return create_backend("baseline:yes", decoding=decoding)

    REMOTE_BACKENDS.add("ray", here)
    yield seen
    REMOTE_BACKENDS.remove("ray")
    REMOTE_BACKENDS.add("ray", real)


def test_run_json_and_the_note_record_a_cluster_off_this_machine(
    ray_here, tmp_path, capsys, monkeypatch
):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    data = tmp_path / "ds"
    api.generate(data, size=96, setups=["rq1"], as_count=0)
    capsys.readouterr()
    base = ["eval", "--data", str(data), "--model", "hf:/models/x", "--runs", "1"]
    for address, remote in (("ray://head:10001", True), ("127.0.0.1:6379", False)):
        out = tmp_path / address.replace("/", "_").replace(":", "_")
        assert main([*base, "--out", str(out), "--executor", "ray", "--ray-address", address]) == 0
        err = capsys.readouterr().err
        assert ("sends the dataset's images and questions to the Ray cluster's" in err) is remote
        run = json.loads((out / "run.json").read_text())
        assert run.get("remote") is (True if remote else None), run
    assert [o["address"] for o in ray_here] == ["ray://head:10001", "127.0.0.1:6379"]
    run = api.evaluate(data, "hf:/models/x", tmp_path / "api", runs=1, executor="ray",
                       ray_address="ray://head:10001")  # fmt: skip
    assert json.loads((run.out / "run.json").read_text())["remote"] is True
