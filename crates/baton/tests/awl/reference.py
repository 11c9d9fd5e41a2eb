"""Prints the reference validator's findings for every case of the AWL corpus.

Usage: python reference.py CORPUS_DIR
Output: one JSON object {case name: [[rule, kind, path], ...]} (or {"error": "..."} when
the reference raised), read by crates/baton/tests/cli/awl_conformance.rs.

A case file is {"kind": "order"|"report"|"sub-order", "document": ..., plus "order" and
optional "sub_orders" for a report, "parent" and optional "siblings" for a sub-order}.
"""
import json
import os
import sys

import agent_work_layer as awl


def check(condition: object, message: object = "check failed") -> None:
    """An assertion that `python -O` and PYTHONOPTIMIZE cannot remove (a bare `assert`
    vanishes under them, and the test would pass having checked nothing)."""
    if not condition:
        raise AssertionError(message)


check(awl.__version__ == "0.5.0", awl.__version__)


def findings(case):
    doc = case["document"]
    kind = case["kind"]
    if kind == "order":
        return awl.validate_order(doc)
    if kind == "report":
        out = awl.validate_report(doc, case["order"])
        if not any(f.rule == "R1" for f in out):
            out += awl.validate_own_cost(doc, case["order"], case.get("sub_orders", []))
        return out
    if kind == "sub-order":
        out = awl.validate_order(doc)
        if not any(f.rule == "O1" for f in out):
            out += awl.validate_child_order(doc, case["parent"])
            out += awl.validate_child_budgets(doc, case["parent"], case.get("siblings", []))
        return out
    raise ValueError(f"unknown case kind {kind!r}")


def main(corpus):
    result = {}
    for name in sorted(os.listdir(corpus)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(corpus, name), encoding="utf-8") as f:
            case = json.load(f)
        try:
            result[name[:-5]] = sorted({(x.rule, x.kind, x.path) for x in findings(case)})
        except Exception as e:  # the reference's own failure is a result to report
            result[name[:-5]] = {"error": f"{type(e).__name__}: {e}"}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
