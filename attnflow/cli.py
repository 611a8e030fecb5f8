"""The ``attnflow`` command line: a thin layer over the library that owns no mathematics.

Each subcommand lives in ``attnflow/commands/<name>.py`` and exposes ``configure(parser)`` and
``run(args) -> int``; register it in ``SUBCOMMANDS``. Options are checked at parse time (the types
in ``attnflow/commands/_args.py``) or at the start of ``run``, which raises ``UsageError`` before
computing: the CLI prints it and exits with status 2, as argparse does.
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnflow", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        module = importlib.import_module(module_name)
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.configure(command)
        command.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    from attnflow.commands._args import UsageError

    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except UsageError as error:
        print(f"attnflow {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
