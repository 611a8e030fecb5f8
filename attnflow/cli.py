"""The ``attnflow`` command line: a thin layer over the library that owns no mathematics.

Each subcommand lives in ``attnflow/commands/<name>.py`` and exposes ``configure(parser)`` and
``run(args) -> int``; register it in ``SUBCOMMANDS``. Options are checked at parse time (the types
in ``attnflow/commands/_args.py``) or at the start of ``run``, which raises ``UsageError`` before
computing: the CLI prints it and exits with status 2, as argparse does. A usage error is one
line on stderr (no usage block, no traceback). Subcommand modules import JAX and the library
inside ``run`` only, so that parsing itself stays cheap.
"""

import argparse
import importlib
import sys

SUBCOMMANDS = {
    "figure": ("attnflow.commands.figure", "make one of the paper's figures (PNG, .npz, .json)"),
    "demo": (
        "attnflow.commands.demo",
        "cluster n random tokens under (SA) and plot the clustered fraction",
    ),
    "landscape": (
        "attnflow.commands.landscape",
        "survey critical points of E_beta: kinds, strict saddles, Problem 3",
    ),
}


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: "attnflow demo: error: argument --n: ..." and status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _plain(text: str) -> str:
    """Help text for a terminal: the docstrings' reStructuredText literals without backticks."""
    return text.replace("``", "")


def build_parser() -> argparse.ArgumentParser:
    from attnflow import __version__

    parser = _Parser(prog="attnflow", description=_plain(__doc__.splitlines()[0]))
    parser.add_argument("--version", action="version", version=f"attnflow {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.configure(command)
        command.add_argument(
            "--no-compilation-cache",
            action="store_true",
            help=(
                "compile every program again instead of loading it from the per-user cache "
                "(~/.cache/attnflow/jax; ATTNFLOW_COMPILATION_CACHE=0 does the same)"
            ),
        )
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from attnflow.commands._args import UsageError

    args = build_parser().parse_args(argv)
    if not args.no_compilation_cache:
        # Programs compiled by an earlier run are loaded from disk
        # (docs/getting-started.md#compilation-cache); the library never switches this on.
        from attnflow._compile_cache import enable_compilation_cache

        enable_compilation_cache()
    try:
        return int(args._run(args) or 0)
    except UsageError as error:
        print(f"attnflow {args.command}: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        # The library raises ValueError only for bad arguments (docs/conventions.md), before
        # computing: one line naming the argument, not a traceback.
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"attnflow {args.command}: error: {first}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
