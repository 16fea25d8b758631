"""The command line of a tool that runs before a training run (preflight, plan, launch):
its own options, then the training command line it reads (``--module M --config C ...`` or
``old.yaml ...``), split the same way by each, with the same help and the same exit status."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def tool_args(argv: Sequence[str] | None) -> list[str]:
    """The tool's command line: ``argv``, or ``sys.argv[1:]`` when None (a ``main(argv)``)."""
    return list(sys.argv[1:] if argv is None else argv)


def tool_options(parser: argparse.ArgumentParser, help_text: str, args: list[str]
                 ) -> tuple[argparse.Namespace, list[str]] | int:
    """``(the tool's options, the training command line)`` of ``args`` (:func:`tool_args`),
    or the exit status to end with at once: 0 after ``-h`` / ``--help`` printed
    ``help_text`` on stdout, 2 after no arguments (the help on stderr) or an option argparse
    refused (its message on stderr)."""
    if not args or args[0] in ("-h", "--help"):
        print(help_text.strip(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    try:
        return parser.parse_known_args(args)
    except SystemExit as exc:
        return 2 if exc.code else 0


__all__ = ["tool_args", "tool_options"]
