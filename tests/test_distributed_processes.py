"""The distributed path across processes (issue #34, item 8): two local CPU processes joined by
``jax.distributed.initialize`` (one CPU device each, gloo collectives) run ``sharded_solve`` and
``sharded_ensemble_solve`` over both; the result equals single-process ``solve`` to 1e-12 in
float64 (one solve of the system; one solve per member of the ensemble)."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import jax.random as jr
import numpy as np
import pytest

import attnflow as af

ROOT = Path(__file__).resolve().parent.parent
TOL = dict(rtol=1e-10, atol=1e-12)

WORKER = """
import sys
import jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
port, pid, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
jax.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=pid)
import jax.random as jr, numpy as np
from jax.experimental import multihost_utils
import attnflow as af
assert len(jax.devices()) == 2 and len(jax.local_devices()) == 1
field = af.SelfAttention(2.0)
sol = af.sharded_solve(field, af.random_tokens(jr.key(0), 8, 3), 3.0, rtol=1e-10, atol=1e-12)
xs = af.random_tokens(jr.key(1), 4 * 8, 3).reshape(4, 8, 3)
ens = af.sharded_ensemble_solve(field, xs, 3.0, rtol=1e-10, atol=1e-12)
ys = multihost_utils.process_allgather(sol.ys, tiled=True)
ye = multihost_utils.process_allgather(ens.ys, tiled=True)
if pid == 0:
    np.savez(out, ys=np.asarray(ys), ye=np.asarray(ye))
"""


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # subprocesses that start JAX and compile: tens of seconds
def test_two_processes_equal_one_process(tmp_path):
    if not jax.config.jax_enable_x64:
        pytest.skip("float64 comparison")
    worker, out = tmp_path / "worker.py", tmp_path / "out.npz"
    worker.write_text(WORKER)
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)  # one CPU device per process
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(port), str(i), str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    logs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(log[-3000:] for log in logs)
    result = np.load(out)
    field = af.SelfAttention(2.0)
    one = af.solve(field, af.random_tokens(jr.key(0), 8, 3), 3.0, **TOL).ys
    np.testing.assert_allclose(result["ys"], one, rtol=0, atol=1e-12)
    xs = af.random_tokens(jr.key(1), 4 * 8, 3).reshape(4, 8, 3)
    # Members of the same size as the single system: their reference solves reuse its program.
    each = np.stack([np.asarray(af.solve(field, x, 3.0, **TOL).ys) for x in xs])
    np.testing.assert_allclose(result["ye"], each, rtol=0, atol=1e-12)
