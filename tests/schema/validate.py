#!/usr/bin/env python3
"""Checks example files against the file format's JSON Schema with an independent validator.

  validate.py SCHEMA valid FILE...        every FILE must satisfy the schema
  validate.py SCHEMA corpus FFN_TRACE DIR  every DIR/*.json the schema rejects, ffn-trace must
                                           reject too (exit 2, one error line)

Uses Debian's python3-jsonschema; without it, exits 77 (ctest's SKIP_RETURN_CODE) saying so.
"""
import json
import pathlib
import subprocess
import sys

try:
    import jsonschema
except ImportError:
    print("skipped: python3-jsonschema is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    schema_path, mode, *rest = sys.argv[1:]
    schema = load(schema_path)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    failures = 0
    if mode == "valid":
        for name in rest:
            errors = sorted(validator.iter_errors(load(name)), key=lambda e: list(e.absolute_path))
            for e in errors[:3]:
                print(f"{name}: {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message[:300]}")
            failures += bool(errors)
            if not errors:
                print(f"{name}: valid")
        if not rest:
            print("no files given")
            return 1
    elif mode == "corpus":
        tool, folder = rest
        rejected = 0
        for path in sorted(pathlib.Path(folder).glob("*.json")):
            try:
                instance = json.loads(path.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError, RecursionError):
                continue  # not JSON at all: the JSON reader's tests cover these
            if validator.is_valid(instance):
                continue
            rejected += 1
            run = subprocess.run([tool, "check", str(path)], capture_output=True, timeout=20)
            if run.returncode != 2 or not run.stderr.startswith(b"error:"):
                failures += 1
                print(f"{path.name}: the schema rejects it, but ffn-trace check exited {run.returncode}: "
                      f"{run.stderr[:200]!r}")
        print(f"{rejected} corpus files rejected by the schema, {failures} of them accepted by ffn-trace")
        if rejected == 0:
            print("the schema rejected no corpus file: the check tested nothing")
            return 1
    else:
        print(f"unknown mode {mode}")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
