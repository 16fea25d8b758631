"""``python -m hyper_parallel.codegen [generate | check | --check] [--root DIR] [--out DIR]``.

* ``generate`` (default): write the generated files that changed (atomically) and delete
  generated files the table no longer produces; prints what changed. ``--out DIR`` writes the
  whole set under ``DIR`` instead of the repository (nothing is deleted).
* ``check`` / ``--check``: regenerate into a temporary directory and compare; silent and exit 0
  when current, else per file a unified diff, the reason and the fix, exit 1.
* ``--timings-json FILE``: also write ``{"black_seconds": ...}`` (used by bench/bench_codegen.py).

Exit status 2: the table, a model descriptor (or a class they describe) is wrong; every problem
is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hyper_parallel.codegen import pipeline
from hyper_parallel.codegen.errors import CodegenError


def _default_root() -> Path:
    # The repository holding this package (an editable install / a checkout).
    return Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hyper_parallel.codegen",
        description="Generate the configuration code and docs from codegen/field_table.yaml, "
        "and the recipe modules from the model descriptors in codegen/models/.",
    )
    parser.add_argument("command", nargs="?", choices=("generate", "check"), default="generate")
    parser.add_argument("--check", action="store_true", help="same as the check command")
    parser.add_argument("--root", type=Path, default=None, help="repository root")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the generated files under this directory instead")
    parser.add_argument("--timings-json", type=Path, default=None)
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    args = parser.parse_args(argv)
    root = (args.root or _default_root()).resolve()
    try:
        if args.check or args.command == "check":
            stale = pipeline.check(root)
            if stale:
                print(pipeline.format_report(stale), file=sys.stderr)
                return 1
            return 0
        generation = pipeline.generate(root)
        changed = pipeline.write(root, generation, out_root=args.out)
    except CodegenError as exc:
        print(f"codegen: error: {exc}", file=sys.stderr)
        print("codegen: nothing was written; fix the file and line named above "
              "(codegen/field_table.yaml, a descriptor in codegen/models/, or the class named) "
              "and run `make codegen` again", file=sys.stderr)
        return 2
    if args.timings_json is not None:
        args.timings_json.write_text(json.dumps({"black_seconds": generation.black_seconds}))
    if not args.quiet:
        for rel in changed:
            print(f"codegen: wrote {rel}" if (args.out or root / rel).exists()
                  else f"codegen: deleted {rel}")
        if not changed:
            print(f"codegen: {len(generation.files)} generated files are up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
