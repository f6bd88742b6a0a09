"""The Ray engine of `m3 batch` (``pip install 'm3-video[ray]'``): one Ray task per video.

Each task runs segment .. abstract for one video in a Ray worker process; a worker keeps its models
between tasks (loaded once per worker and pipeline config), so a cluster pays the model loads once
per worker, not per video. Tasks ask for ``--cpus-per-task`` CPUs and ``--gpus-per-task`` GPUs (the
GPU backends of faces, diarize and memorize: ``--device cuda`` with ``--set faces.backend=insightface``
...), Ray retries a task whose worker died (``--retries``), and at most ``--jobs`` tasks are in flight
so results stream back to the single writer (the driver) as videos finish. Stage errors come back as
data and are reported per video like the local engine's.

The videos and the cache must be reachable under the same paths from every node (a shared file
system); the memory is written by the driver only, so it can be a local directory or ``s3://``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator
from typing import Any

from m3cli.stages.batch.stage import WorkResult
from m3cli.stages.core.errors import M3Error

log = logging.getLogger(__name__)


def _ray_video(config: Any, settings: Any, log_level: int, path: str, video: str) -> WorkResult:
    """The task body: build this worker's models on its first video (or a new config), then run."""
    from m3cli.stages.batch import stage as batch

    key = (config, settings.model_dump_json())
    if batch._WORKER.get("key") != key:
        batch.worker_setup(config, settings, log_level)
    return batch.work_video(path, video)


def check_workers_see_this_m3(cwd: str | None = None) -> None:
    """Refuse to start where Ray's workers would import a different m3 than this driver.

    Ray puts the driver's working directory first on every worker's sys.path (so that a script's own
    modules travel with it). Started from a source checkout whose ``m3cli/`` is not the package this
    driver runs (m3 installed with ``pip install .``, the checkout beside it), each worker would import
    that bare folder, which has no ``m3cli.stages``, and every task would fail. m3 never patches a
    package's ``__path__`` to paper over that, so the run stops here with what to do instead.
    """
    import m3cli

    here = os.path.abspath(cwd or os.getcwd())
    shadow = os.path.join(here, "m3cli", "__init__.py")
    if os.path.isfile(shadow) and not os.path.samefile(shadow, m3cli.__file__):
        raise M3Error(
            f"--engine ray: {here} holds an m3cli/ folder that Ray's workers would import instead of the "
            f"installed m3 ({os.path.dirname(m3cli.__file__)}); run m3 batch from another directory, "
            "or install this checkout with `pip install -e .`"
        )


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise M3Error(
            "--engine ray needs Ray: pip install 'm3-video[ray]' (or pip install 'ray[default]')"
        ) from None
    return ray


class RayEngine:
    """Videos as Ray tasks on the cluster at ``address`` (or ``$RAY_ADDRESS``), else on a Ray instance
    started here for this run (``jobs`` CPUs, bound to 127.0.0.1, stopped at the end)."""

    name = "ray"

    def __init__(
        self,
        config: Any,
        settings: Any,
        address: str | None = None,
        jobs: int = 1,
        cpus_per_task: float = 1.0,
        gpus_per_task: float = 0.0,
        retries: int = 1,
        log_level: int = logging.WARNING,
    ) -> None:
        if jobs < 1:
            raise M3Error(f"--jobs must be at least 1, got {jobs}")
        if cpus_per_task <= 0 or gpus_per_task < 0:
            raise M3Error("--cpus-per-task must be > 0 and --gpus-per-task >= 0")
        if cpus_per_task < 2 and getattr(config, "parallel", False):
            config = dataclasses.replace(config, parallel=False)  # a task gets one core: no second thread
        self.config, self.settings = config, settings
        self.address = address or os.environ.get("RAY_ADDRESS") or None
        self.jobs, self.cpus, self.gpus, self.retries = jobs, cpus_per_task, gpus_per_task, retries
        self.log_level = log_level

    def _init(self, ray: Any) -> bool:
        """Connect (or start a local instance); True when this run started Ray and must stop it."""
        if ray.is_initialized():
            return False
        quiet = {"log_to_driver": False, "logging_level": logging.ERROR, "include_dashboard": False}
        try:
            if self.address:
                ray.init(address=self.address, **quiet)
            else:
                ray.init(
                    num_cpus=max(self.jobs * self.cpus, self.cpus),
                    object_store_memory=200 * 1024 * 1024,
                    _node_ip_address="127.0.0.1",
                    **quiet,
                )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = self.address or "a local instance"
            raise M3Error(f"cannot start or reach Ray at {where}: {exc}") from None
        return True

    def run(self, work: list[tuple[str, str]]) -> Iterator[WorkResult]:
        if not work:
            return
        check_workers_see_this_m3()
        ray = _import_ray()
        started = self._init(ray)
        try:
            task = ray.remote(_ray_video).options(
                num_cpus=self.cpus, num_gpus=self.gpus, max_retries=self.retries, retry_exceptions=False
            )
            config_ref, settings_ref = ray.put(self.config), ray.put(self.settings)
            queue = list(work)
            inflight: dict[Any, tuple[str, str]] = {}
            while queue or inflight:
                while queue and len(inflight) < self.jobs:
                    path, vid = queue.pop(0)
                    ref = task.remote(config_ref, settings_ref, self.log_level, path, vid)
                    inflight[ref] = (path, vid)
                ready, _ = ray.wait(list(inflight), num_returns=1)
                for ref in ready:
                    path, vid = inflight.pop(ref)
                    try:
                        result = ray.get(ref)
                    except Exception as exc:  # the task died past its retries, or the cluster went away
                        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                        failed = f"{path}: Ray task failed: {type(exc).__name__} {text}"
                        result = WorkResult(path, vid, error=failed)
                    yield result
        finally:
            if started:
                ray.shutdown()
