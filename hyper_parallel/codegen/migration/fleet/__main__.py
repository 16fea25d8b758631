"""``python -m hyper_parallel.codegen.migration.fleet YAML_OR_FOLDER ...``: print the line counts
of the fleet module against the single-file recipes (:func:`.report.line_counts`)."""

from hyper_parallel.codegen.migration.fleet.report import main

raise SystemExit(main())
