import subprocess
import sys

import pytest

from infralens.xla.devices import host_devices


def test_the_suite_runs_on_eight_simulated_devices():
    devices = host_devices(8)  # tests/conftest.py asked for eight before JAX started
    assert len(devices) == 8 and {d.platform for d in devices} == {"cpu"}
    assert len({d.id for d in devices}) == 8


def test_a_different_count_after_start_is_refused():
    with pytest.raises(RuntimeError, match="already runs with 8"):
        host_devices(4)


def test_non_positive_count_is_refused():
    with pytest.raises(ValueError, match="at least 1"):
        host_devices(0)


def test_a_fresh_process_gets_the_count_it_asks_for():
    code = ("import os; os.environ.pop('JAX_NUM_CPU_DEVICES', None)\n"
            "from infralens.xla.devices import host_devices\n"
            "print(len(host_devices(3)))\n")
    env_clean = {k: v for k, v in __import__("os").environ.items() if k != "JAX_NUM_CPU_DEVICES"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env_clean,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3"
