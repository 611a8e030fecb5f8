"""Packaging: a wheel built from a checkout holds the package and nothing else, even with the
CLI's output folder ``attnflow-figures/`` (and other ``attnflow*`` folders) beside it."""

import importlib.util
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import setuptools

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _checkout_with_outputs(tmp_path):
    """A copy of the package sources with the folders a user's runs leave next to them."""
    tree = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    shutil.copytree(ROOT / "attnflow", tree / "attnflow", ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    for folder in ("attnflow-figures", "attnflow_scratch"):
        (tree / folder).mkdir()
        (tree / folder / "fig3.png").write_bytes(b"\x89PNG")
        (tree / folder / "notes.py").write_text("x = 1\n")
    return tree


def _can_build_wheels():
    version = tuple(int(p) for p in setuptools.__version__.split(".")[:2])
    return version >= (70, 1) or importlib.util.find_spec("wheel") is not None


def _expected_package_files():
    files = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "attnflow").rglob("*.py")
        if "__pycache__" not in p.parts
    }
    files |= {"attnflow/py.typed"}
    files |= {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "attnflow/pretrained/data").glob("*.txt")
    }
    return files


def _check_members(names):
    stray = sorted(n for n in names if not n.startswith("attnflow/"))
    assert not stray, f"files outside the package: {stray[:10]}"
    missing = sorted(_expected_package_files() - set(names))
    assert not missing, f"package files missing: {missing[:10]}"


def test_built_distribution_holds_only_the_package(tmp_path):
    tree = _checkout_with_outputs(tmp_path)
    dist = tmp_path / "dist"
    if _can_build_wheels():
        # The documented command, without network: the installed setuptools builds it.
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        command += ["--no-index", "-w", str(dist), str(tree)]
        subprocess.run(command, check=True, capture_output=True, timeout=600)
        (wheel,) = dist.glob("attnflow-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if ".dist-info/" not in n]
    else:
        # setuptools < 70.1 without the `wheel` package cannot build a wheel offline: the sdist
        # goes through the same package discovery.
        code = (
            "import sys; from setuptools import build_meta as b; print(b.build_sdist(sys.argv[1]))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(dist)],
            cwd=tree,
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
        )
        (sdist,) = dist.glob("attnflow-*.tar.gz")
        with tarfile.open(sdist) as archive:
            prefix = done.stdout.strip().splitlines()[-1].removesuffix(".tar.gz") + "/"
            names = [m.name.removeprefix(prefix) for m in archive.getmembers() if m.isfile()]
        names = [n for n in names if n.startswith("attnflow") and not n.startswith("attnflow.egg")]
    _check_members(names)
