"""Thread counts per numeric library: defaults, m3.toml and M3_*_THREADS, and what they reach."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import run_m3
from m3cli.stages.core import threads
from m3cli.stages.core.config import load_settings
from m3cli.stages.core.errors import M3Error


def test_one_thread_per_library_by_default():
    s = load_settings(environ={})
    assert {lib: getattr(s.threads, lib) for lib in threads.LIBRARIES} == dict.fromkeys(threads.LIBRARIES, 1)


def test_file_and_environment_set_threads(tmp_path):
    cfg = tmp_path / "m3.toml"
    cfg.write_text("[threads]\ntorch = 3\nctranslate2 = 2\n")
    s = load_settings(config_path=cfg, environ={"M3_TORCH_THREADS": "4", "M3_ONNX_THREADS": "2"})
    assert (s.threads.torch, s.threads.onnxruntime, s.threads.ctranslate2, s.threads.blas) == (4, 2, 2, 1)


def test_zero_threads_is_a_clear_configuration_error():
    with pytest.raises(M3Error, match="threads.torch"):
        load_settings(environ={"M3_TORCH_THREADS": "0"})


def test_configure_sets_the_counts_the_backends_read():
    saved = dict(threads._counts)
    try:
        threads.configure(load_settings(environ={"M3_CT2_THREADS": "2", "M3_ONNX_THREADS": "3"}).threads)
        counts = [threads.count(lib) for lib in ("ctranslate2", "onnxruntime", "torch")]
        assert counts == [2, 3, 1]
        import onnxruntime

        assert threads.onnx_session_options(onnxruntime).intra_op_num_threads == 3
        with pytest.raises(ValueError, match="unknown library"):
            threads.count("cuda")
    finally:
        threads._counts.clear()
        threads._counts.update(saved)


def test_onnx_sessions_keep_no_memory_arena():
    """The arena keeps each run's buffers and only grows with inputs whose shapes vary (speech turns,
    token counts): 150-230 MB of a pass's peak on real footage (docs/scale-length.md)."""
    import onnxruntime

    assert threads.onnx_session_options(onnxruntime).enable_cpu_mem_arena is False


def _printed_in_fresh_process(code: str) -> list[str]:
    """What ``code`` prints, split, run in a new interpreter whose environment sets no thread counts."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return out.stdout.split()


def test_blas_is_capped_through_the_environment_before_numpy_loads():
    code = (
        "import os, sys\n"
        "from m3cli.stages.core import threads\n"
        "from m3cli.stages.core.config import load_settings\n"
        "threads.configure(load_settings(environ={'M3_BLAS_THREADS': '2'}).threads)\n"
        "assert 'numpy' not in sys.modules\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])\n"
    )
    assert _printed_in_fresh_process(code) == ["2", "2"]


def test_config_show_lists_the_thread_counts():
    out = run_m3("config", "show", env={"M3_TORCH_THREADS": "2"}, check=True).stdout.decode()
    assert "[threads]" in out and "torch = 2" in out and "onnxruntime = 1" in out


def test_blas_cap_reaches_spawned_processes_when_numpy_is_already_loaded():
    """With numpy loaded first, threadpoolctl caps this process and the environment still carries the
    cap to what loads later and to spawned processes (`m3 batch`'s workers once used every core)."""
    code = (
        "import os, numpy\n"
        "from threadpoolctl import threadpool_info\n"
        "from m3cli.stages.core import threads\n"
        "from m3cli.stages.core.config import load_settings\n"
        "threads.configure(load_settings(environ={'M3_BLAS_THREADS': '1'}).threads)\n"
        "assert {i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'} == {1}\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_NUM_THREADS'])\n"
    )
    assert _printed_in_fresh_process(code) == ["1", "1"]


def test_batch_workers_take_the_thread_settings(tmp_path):
    """A spawned `m3 batch` worker starts with no thread counts of its own: worker_setup adopts them."""
    code = (
        "from m3cli.stages.batch.stage import worker_setup\n"
        "from m3cli.stages.core import threads\n"
        "from m3cli.stages.core.config import load_settings\n"
        "from m3cli.stages.pipeline import PipelineConfig\n"
        f"env = {{'M3_CT2_THREADS': '2', 'M3_ONNX_THREADS': '3', 'M3_CACHE': {str(tmp_path)!r}}}\n"
        "worker_setup(PipelineConfig(), load_settings(environ=env))\n"
        "print(threads.count('ctranslate2'), threads.count('onnxruntime'), threads.count('blas'))\n"
    )
    assert _printed_in_fresh_process(code) == ["2", "3", "1"]
