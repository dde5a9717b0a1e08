"""``--executor ray`` for ``hf:``: one model replica per Ray actor (per GPU, or per CPU worker).

The driver splits each request list into batches of ``batch_size`` exactly as one in-process
``HFBackend`` would, hands each batch to a free replica (at most ``in_flight`` per replica) and
calls ``on_reply`` in the driver as each batch comes back. So the runner's write-ahead
``calls.jsonl`` and resume are unchanged, and a greedy model gives the same replies whatever the
number of replicas (each batch has the same members as in a local run, and a sampled batch's seed
comes from its own keys).

A replica whose process dies (kill -9, OOM killer, lost node) fails the batches it held: they go
back to the front of the queue for the next free replica, up to ``retries`` times per batch,
after which their requests become errors (which the next resume retries). Ray restarts a dead
replica (``max_restarts``); the driver sends it work again only after a probe call answers, and
drops it when the probe fails too. With no replica left, the remaining requests become errors.

``address`` (or ``RAY_ADDRESS``) joins a cluster; otherwise a local Ray with ``replicas`` CPUs
is started and shut down by :meth:`RayReplicas.close`. ``replicas`` defaults to the cluster's
GPU count, or its CPU count where it has no GPU. Every node needs radspatial and the model files
(a shared path, or a hub id with ``--hf-allow-download``).

Example::

    backend = create_backend("hf:/models/llava", executor="ray", replicas=2, batch_size=4)
    backend.generate(requests, on_reply=lambda req, rep: print(req.key, rep.text))
    backend.close()
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from radspatial.core.executor import ensure_ray
from radspatial.models.base import (
    REMOTE_BACKENDS,
    Decoding,
    OnReply,
    Reply,
    Request,
    create_backend,
    import_ray,
    ray_backends,
    traits,
)

log = logging.getLogger(__name__)
__all__ = ["RayReplicas", "create_ray_backend", "import_ray"]


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    lines = [x for x in str(cause).strip().splitlines() if x.strip()]
    text = f"{type(cause).__name__}: {lines[-1].strip() if lines else ''}".rstrip(": ")
    return text if len(text) <= 240 else text[:237] + "..."


class _Replica:
    """Runs inside a Ray actor: one ordinary backend, answering one batch per call."""

    def __init__(self, spec: str, decoding: Decoding, options: dict[str, Any]) -> None:
        self.backend = create_backend(spec, decoding=decoding, **options)

    def describe(self) -> dict[str, Any]:
        return {**self.backend.describe(), "pid": os.getpid()}

    def pid(self) -> int:
        return os.getpid()

    def generate(self, requests: list[Request]) -> list[Reply]:
        replies: dict[str, Reply] = {}
        self.backend.generate(requests, lambda req, rep: replies.__setitem__(req.key, rep))
        missing = Reply(text=None, error="the replica's backend gave no reply")
        return [replies.get(req.key, missing) for req in requests]


class RayReplicas:
    """``replicas`` copies of one in-process backend on Ray actors, fed batch by batch."""

    def __init__(
        self,
        spec: str,
        *,
        decoding: Decoding,
        replicas: int | None = None,
        address: str | None = None,
        batch_size: int = 8,
        in_flight: int = 2,
        retries: int = 2,
        max_restarts: int = 3,
        **options: Any,
    ) -> None:
        if traits(spec.partition(":")[0]).ray != "replicas":
            kinds = [p for p in ray_backends() if traits(p).ray == "replicas"]
            raise ValueError(f"{spec}: --executor ray runs {'/'.join(kinds)} models only")
        if replicas is not None and replicas < 1:
            raise ValueError(f"--replicas must be >= 1, got {replicas}")
        if batch_size < 1 or in_flight < 1 or retries < 0:
            raise ValueError("batch_size and in_flight must be >= 1, retries >= 0")
        ray = import_ray()
        self.spec, self.decoding, self.batch_size = spec, decoding, batch_size
        self.in_flight, self.retries = in_flight, retries
        self._started = ensure_ray(ray, address, replicas)
        try:
            self._actors, self.resources = self._start(ray, replicas, max_restarts, options)
            try:
                infos = ray.get([a.describe.remote() for a in self._actors])
            except ray.exceptions.RayError as exc:
                raise ValueError(f"{spec}: a replica failed to start: {_first_line(exc)}") from None
        except BaseException:
            self.close()
            raise
        self.replica_info = infos
        self.stats = {"replica_deaths": 0, "retried_batches": 0, "dropped_replicas": 0}
        self._live = list(range(len(self._actors)))  # replicas that take work now
        self._suspect: dict[int, float] = {}  # died replica -> when to probe it next

    def _start(
        self, ray: Any, replicas: int | None, max_restarts: int, options: dict[str, Any]
    ) -> tuple[list[Any], dict[str, float]]:
        total = ray.cluster_resources()
        gpus, cpus = int(total.get("GPU", 0)), int(total.get("CPU", 0))
        if gpus >= 1:
            resources, have, unit = {"num_gpus": 1, "num_cpus": 1}, gpus, "GPU"
        else:
            resources, have, unit = {"num_cpus": 1}, cpus, "CPU"
        n = replicas or have
        if n > have:  # an actor that can never be placed would wait forever
            raise ValueError(f"--replicas {n}: the Ray cluster has {have} {unit}(s)")
        actor = ray.remote(**resources, max_restarts=max_restarts, max_task_retries=0)(_Replica)
        replica_options = {**options, "batch_size": self.batch_size}
        return [actor.remote(self.spec, self.decoding, replica_options) for _ in range(n)], {
            k.removeprefix("num_"): v for k, v in resources.items()
        }

    @property
    def replicas(self) -> int:
        return len(self._actors)

    @property
    def chunk_size(self) -> int:
        """Requests the runner hands over per call: enough to keep every replica busy."""
        return max(256, 16 * self.replicas * self.batch_size)

    def describe(self) -> dict[str, Any]:
        first = dict(self.replica_info[0]) if self.replica_info else {}
        first.pop("pid", None)
        return {
            **first,
            "executor": "ray",
            "replicas": self.replicas,
            "resources_per_replica": self.resources,
            "batch_size": self.batch_size,
        }

    def replica_pids(self) -> list[int]:
        ray = import_ray()
        return ray.get([a.pid.remote() for a in self._actors])

    def generate(self, requests: Sequence[Request], on_reply: OnReply) -> None:
        ray = import_ray()
        size = self.batch_size
        queue = deque((list(requests[i : i + size]), 0) for i in range(0, len(requests), size))
        busy: dict[Any, tuple[int, list[Request], int]] = {}  # batch ref -> replica, batch, deaths
        probes: dict[Any, int] = {}  # ref of a probe call -> replica
        load = dict.fromkeys(self._live, 0)

        def submit() -> None:
            while queue and self._live:
                i = min(self._live, key=lambda j: (load.get(j, 0), j))
                if load.get(i, 0) >= self.in_flight:
                    return
                batch, deaths = queue.popleft()
                busy[self._actors[i].generate.remote(batch)] = (i, batch, deaths)
                load[i] = load.get(i, 0) + 1

        try:
            while queue or busy:
                now = time.monotonic()
                for i, due in list(self._suspect.items()):  # restarted replicas: probe first
                    if due <= now and i not in probes.values():
                        probes[self._actors[i].pid.remote()] = i
                submit()
                if not busy and not probes and not self._suspect:
                    break  # nothing runs and no replica may come back
                if not busy and not probes:  # only replicas still restarting: wait for them
                    time.sleep(max(0.0, min(self._suspect.values()) - time.monotonic()))
                    continue
                ready, _ = ray.wait([*busy, *probes], num_returns=1, timeout=0.2)
                for ref in ready:
                    if ref in probes:
                        self._probe_done(ray, ref, probes.pop(ref))
                        continue
                    i, batch, deaths = busy.pop(ref)
                    load[i] -= 1
                    self._batch_done(ray, ref, i, batch, deaths, queue, on_reply)
            for batch, _ in queue:  # no replica left
                for req in batch:
                    on_reply(req, Reply(text=None, error="no Ray replica left to answer"))
        finally:
            for ref in busy:  # interrupted: stop what is running
                ray.cancel(ref, force=False)

    def _batch_done(self, ray, ref, i, batch, deaths, queue, on_reply) -> None:
        try:
            replies = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            deaths += 1
            why = _first_line(exc)
            if i in self._live:  # the first failure seen from this incarnation
                self.stats["replica_deaths"] += 1
                self._live.remove(i)
                self._suspect[i] = time.monotonic()
                log.warning("Ray replica %d died (%s); its batches go to another replica", i, why)
            if deaths > self.retries:
                error = f"Ray replica died {deaths} times on this batch: {why}"
                for req in batch:
                    on_reply(req, Reply(text=None, error=error))
            else:
                self.stats["retried_batches"] += 1
                queue.appendleft((batch, deaths))
            return
        except ray.exceptions.RayError as exc:  # the call raised: an error, not a retry
            error = f"Ray replica {i}: {_first_line(exc)}"
            for req in batch:
                on_reply(req, Reply(text=None, error=error))
            return
        for req, reply in zip(batch, replies, strict=True):
            meta = {**reply.meta, "replica": i}
            on_reply(req, Reply(reply.text, reply.error, reply.latency_s, meta))

    def _probe_done(self, ray, ref, i: int) -> None:
        """A restarted replica answers again (back to work), is restarting, or is gone."""
        try:
            ray.get(ref)
        except ray.exceptions.ActorUnavailableError:
            self._suspect[i] = time.monotonic() + 0.5  # still restarting: ask again soon
            return
        except ray.exceptions.RayError as exc:
            self.stats["dropped_replicas"] += 1
            self._suspect.pop(i, None)
            log.warning("Ray replica %d is gone for good (%s)", i, _first_line(exc))
            return
        self._suspect.pop(i, None)
        self._live.append(i)

    def close(self) -> None:
        """Stop the replicas, and the local Ray if this backend started it."""
        ray = import_ray()
        for actor in getattr(self, "_actors", []):
            with contextlib.suppress(Exception):  # already gone
                ray.kill(actor)
        self._actors = []
        if self._started and ray.is_initialized():
            ray.shutdown()
        self._started = False


@REMOTE_BACKENDS.register("ray")
def create_ray_backend(spec: str, *, decoding: Decoding, **options: Any) -> Any:
    """``hf:`` -> :class:`RayReplicas`; ``vllm:`` -> Ray Data's LLM batch processor."""
    prefix, _, rest = spec.partition(":")
    how = traits(prefix).ray  # what the backend declares (register_backend(..., ray=...))
    if how is None:
        runs = " and ".join(f"{p}:" for p in ray_backends())
        raise ValueError(f"{spec}: --executor ray runs {runs} models only")
    if not rest.strip():
        raise ValueError(f"model spec {spec!r}: nothing after ':'")
    options.pop("concurrency", None)
    if how == "data":
        from radspatial.models.ray_data_vllm import RayDataVLLM

        return RayDataVLLM(rest, decoding=decoding, **options)
    if rest.startswith(("/", "./", "../", "~")) and not Path(rest).expanduser().is_dir():
        raise ValueError(f"{spec}: no such model folder")
    return RayReplicas(spec, decoding=decoding, **options)
