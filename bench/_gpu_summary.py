"""The summary of a GPU script's run: ``OUT/summary.json`` from ``OUT/steps.jsonl`` and what
each step left in ``OUT`` (``bench/_gpu_steps.sh`` records the steps).

    python bench/_gpu_summary.py OUT --script gpu_check --mode run|dry

Each step gets a status:

* from its report ``OUT/<step>.json`` when it wrote one with a ``status`` (the checks of
  ``bench/_gpu_checks.py``, the layouts of ``bench/_layout_check.py``);
* ``parity`` (the kernel parity tests): from pytest's exit status and its JUnit counts -- all
  skipped is ``skipped``, some ``partial``;
* ``throughput``: from ``gpu_throughput.json`` -- a kernel choice that failed is ``partial``
  when the choice is fla and fla-core is missing, else ``fail``;
* else from the exit status (0 ``pass``; 124 or more: timed out or killed).

A non-zero exit status always fails a step, whatever its report says. Exit status of this
program (the script's): 1 when a step failed; in a real run (``--mode run``) 3 when one was
skipped or partial -- the check did not happen, which on a GPU machine means something is
missing (fla-core, a second GPU) and is said loudly; 0 otherwise. A dry run expects skips.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

STATUSES = ("pass", "partial", "skipped", "fail")


def _json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _parity(out: Path, record: dict) -> dict:
    info: dict = {}
    try:
        suite = ET.parse(out / "parity.xml").getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
        info["tests"] = counts
    except (OSError, ET.ParseError, AttributeError) as exc:
        return {"status": "fail", "why": f"no JUnit report: {exc}"}
    ratios = _json(out / "parity_ratios.json")
    if ratios:
        info["worst_ratio_over_tol"] = max(r["ratio"] / r["tol"] for r in ratios)
    if record.get("rc"):
        info["status"] = "fail"
    elif counts["skipped"] and counts["skipped"] == counts["tests"]:
        info["status"] = "skipped"
    else:
        info["status"] = "partial" if counts["skipped"] else "pass"
    return info


def _throughput(out: Path, record: dict, fla_available: bool) -> dict:
    bench = _json(out / "gpu_throughput.json")
    if bench is None:
        return {"status": "fail", "why": "no gpu_throughput.json"}
    info: dict = {"figures": {
        name: {k: rec.get(k) for k in ("tokens_per_s", "mfu", "median_step_s", "error", "config")
               if k in rec}
        for name, rec in bench.get("choices", {}).items()}}
    info["figures"].update({k: v for k, v in bench.items() if k.startswith(("speedup", "max_loss"))})
    failed = [name for name, rec in bench.get("choices", {}).items() if "error" in rec]
    if "skipped" in bench or "error" in bench:
        info.update(status="skipped", why=bench.get("skipped") or bench.get("error"))
    elif not failed:
        info["status"] = "pass"
    else:
        missing_fla = failed == ["fla"] and not fla_available
        info["status"] = "partial" if missing_fla else "fail"
    return info


def step_status(out: Path, record: dict, fla_available: bool) -> dict:
    """The status and figures of one recorded step."""
    name = record["step"]
    if "skipped" in record:
        return {"status": "skipped", "why": record["skipped"]}
    info: dict = {"rc": record["rc"], "seconds": record["seconds"]}
    if name == "parity":
        info.update(_parity(out, record))
    elif name == "throughput":
        info.update(_throughput(out, record, fla_available))
    else:
        report = _json(out / f"{name}.json")
        if isinstance(report, dict) and report.get("status") in STATUSES:
            info["status"] = report["status"]
            for key in ("problems", "skipped"):
                if report.get(key):
                    info[key] = report[key]
            info["report"] = f"{name}.json"
        else:
            info["status"] = "pass" if record["rc"] == 0 else "fail"
    if record["rc"] != 0:
        info["status"] = "fail"
        if record["rc"] >= 124:
            info["why"] = "timed out or killed"
    return info


def summarize(out: Path, script: str, mode: str) -> tuple[dict, int]:
    records = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()
               if line.strip()] if (out / "steps.jsonl").exists() else []
    env = (out / "env.txt").read_text() if (out / "env.txt").exists() else ""
    fla_available = "fla-core kernels: importable" in env
    steps = {record["step"]: step_status(out, record, fla_available) for record in records}
    failed = [name for name, info in steps.items() if info["status"] == "fail"]
    incomplete = [name for name, info in steps.items()
                  if info["status"] in ("skipped", "partial")]
    summary = {
        "script": script, "mode": mode,
        "status": "fail" if failed else ("incomplete" if incomplete else "pass"),
        "failed": failed, "skipped_or_partial": incomplete,
        "elapsed_s": int(os.environ.get("ELAPSED", "0") or 0),
        "fla_core_available": fla_available,
        "causal_conv1d_available": "causal-conv1d: importable" in env,
        "steps": steps,
    }
    if not records:  # nothing ran: never a pass
        failed = ["(no step ran)"]
        summary.update(status="fail", failed=failed)
    code = 1 if failed else (3 if incomplete and mode == "run" else 0)
    return summary, code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--script", required=True)
    parser.add_argument("--mode", choices=("run", "dry"), required=True)
    opts = parser.parse_args(argv)
    summary, code = summarize(opts.out, opts.script, opts.mode)
    text = json.dumps(summary, indent=2)
    (opts.out / "summary.json").write_text(text + "\n")
    print(text)
    verdict = {0: "PASS" if summary["status"] == "pass" else "DRY RUN OK (skips expected)",
               1: f"FAILED: {', '.join(summary['failed'])}",
               3: "INCOMPLETE, these checks did not run in full: "
                  + ", ".join(summary["skipped_or_partial"])}[code]
    print(f"{opts.script} ({opts.mode}): {verdict}; summary in {opts.out / 'summary.json'}",
          file=sys.stderr if code else sys.stdout)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
