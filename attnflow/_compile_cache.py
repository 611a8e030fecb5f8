"""JAX's persistent compilation cache, switched on by the command line, the figures and the
notebooks (never by ``import attnflow``): compiled programs are kept on disk and a second
process loads them instead of compiling again."""

import os
import pathlib

ENV_SWITCH = "ATTNFLOW_COMPILATION_CACHE"
_OFF = ("0", "false", "no", "off")


def default_cache_dir() -> pathlib.Path:
    """``$XDG_CACHE_HOME/attnflow/jax``, or ``~/.cache/attnflow/jax`` when XDG_CACHE_HOME is
    unset or empty (the XDG base-directory convention)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "attnflow" / "jax"


def cache_switched_off() -> bool:
    """True when ``ATTNFLOW_COMPILATION_CACHE`` is 0, false, no or off (any case)."""
    return os.environ.get(ENV_SWITCH, "").strip().lower() in _OFF


def enable_compilation_cache(path=None) -> pathlib.Path | None:
    """Keep compiled programs on disk, so that the next process loads them instead of compiling.

    JAX's persistent compilation cache, in a per-user folder: ``path``, else the folder JAX was
    already given (``JAX_COMPILATION_CACHE_DIR``), else ``$XDG_CACHE_HOME/attnflow/jax``
    (``~/.cache/attnflow/jax``). Programs that compiled in any time are written (JAX's default
    keeps only those over 1 s), unless ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` says
    otherwise. An entry is keyed on the program, the XLA flags and the versions of jax and jaxlib,
    so a stale entry is never used; the folder can be deleted at any time.

    The ``attnflow`` command, the figures and the notebooks call this; ``import attnflow`` does
    not (a library should not write to your disk unasked): call it yourself once, before the
    first computation, to get the same. ``ATTNFLOW_COMPILATION_CACHE=0`` in the environment
    turns it off everywhere (this function then does nothing and returns None), as does
    ``attnflow --no-compilation-cache``.

    Programs that contain a run-time check (``equinox.error_if`` with equinox's default
    ``EQX_ON_ERROR=raise``) use a host callback, and jax 0.10.2 never writes those to the cache:
    docs/getting-started.md#compilation-cache lists which attnflow programs these are and how to
    run them cached (``EQX_ON_ERROR=nan``).

    Args:
        path: the cache folder (a string or path; created if missing), or None for the default
            above.

    Returns:
        The folder in use, or None when ``ATTNFLOW_COMPILATION_CACHE`` switches the cache off.

    Example:
        >>> import os, tempfile, attnflow as af
        >>> folder = tempfile.mkdtemp()
        >>> os.environ["ATTNFLOW_COMPILATION_CACHE"] = "0"
        >>> af.enable_compilation_cache(folder) is None   # switched off by the environment
        True
        >>> del os.environ["ATTNFLOW_COMPILATION_CACHE"]
    """
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise ValueError(
            f"path: expected a folder (a str or os.PathLike) or None, got {type(path).__name__} "
            f"{path!r}"[:200]
        )
    if cache_switched_off():
        return None
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    current = jax.config.jax_compilation_cache_dir
    if path is None:
        folder = pathlib.Path(current) if current else default_cache_dir()
    else:
        folder = pathlib.Path(os.path.expanduser(os.fspath(path)))
        if not os.fspath(path):
            raise ValueError("path: expected a folder, got an empty string")
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"path: expected a folder, got the file {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    if current != str(folder):
        jax.config.update("jax_compilation_cache_dir", str(folder))
        if current:  # JAX opened the cache at the old folder: open it again at the new one
            compilation_cache.reset_cache()
    return folder
