#!/usr/bin/env python3
"""Independent checks of constrained output (not tps's grammar code):
  validate_output.py schema SCHEMA_FILE OUTPUT_FILE   the output parses as JSON
                                                      and validates (jsonschema)
  validate_output.py regex PATTERN_FILE OUTPUT_FILE   re.fullmatch
Exit 0: valid; 1: invalid (the reason on stdout); 77: jsonschema missing."""
import json
import re
import sys


def main():
    kind, spec_path, out_path = sys.argv[1:4]
    spec = open(spec_path, encoding="utf-8").read()
    out = open(out_path, encoding="utf-8").read()
    if kind == "regex":
        if re.fullmatch(spec, out) is None:
            print(f"{out!r} does not match {spec!r}")
            return 1
        return 0
    try:
        import jsonschema
    except ImportError:
        print("python3-jsonschema is not installed (scripts/install-deps.sh)")
        return 77
    try:
        value = json.loads(out)
    except ValueError as e:
        print(f"not JSON ({e}): {out!r}")
        return 1
    try:
        jsonschema.validate(value, json.loads(spec),
                            format_checker=jsonschema.FormatChecker())
    except jsonschema.ValidationError as e:
        print(f"invalid: {e.message}: {out!r}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
