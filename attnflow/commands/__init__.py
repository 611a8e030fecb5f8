"""Subcommands of the ``attnflow`` CLI (see attnflow/cli.py)."""
