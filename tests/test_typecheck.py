"""Run the core modules' docstring examples with jaxtyping's runtime shape checking on.

The rest of the suite runs without the import hook so that it sees the error messages users
see; this test checks that the jaxtyping annotations agree with what the code does.
"""

import subprocess
import sys

SCRIPT = r"""
import doctest, importlib, sys
import jax
jax.config.update("jax_enable_x64", True)
from jaxtyping import install_import_hook
# The core modules every other module builds on (each doctest compiles afresh in this process).
names = ["attnflow._sphere", "attnflow._energy", "attnflow._metric",
         "attnflow._fields._self_attention", "attnflow._solve", "attnflow._diagnostics"]
# Imported under the hook (``import attnflow`` alone imports none of them: names load on use).
with install_import_hook("attnflow", "beartype.beartype"):
    modules = {name: importlib.import_module(name) for name in names}
    import attnflow
# The hook did instrument them: a token check by beartype rejects a wrong rank.
try:
    attnflow.gram(jax.numpy.ones(3))  # annotated (n, d)
except Exception as error:
    assert "beartype" in type(error).__module__ or "jaxtyping" in type(error).__module__, error
else:
    sys.exit("the import hook did not instrument attnflow")
failed = 0
for name in names:
    module = modules[name]
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, name):
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        failed += runner.run(test).failed
sys.exit(1 if failed else 0)
"""


def test_docstring_examples_pass_runtime_shape_checks():
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
