#!/usr/bin/env python3
"""Validates JSON text against a JSON Schema with Python jsonschema (the
reference the structured-output e2e tests trust, not tandem's own grammar).
stdin: {"schema": {...}, "text": "..."}; exit 0 and "ok", or exit 1 and why."""
import json
import sys

import jsonschema

req = json.load(sys.stdin)
try:
    value = json.loads(req["text"])
except json.JSONDecodeError as e:
    print(f"not JSON: {e}")
    sys.exit(1)
errors = list(jsonschema.Draft202012Validator(req["schema"], format_checker=jsonschema.FormatChecker()).iter_errors(value))
if errors:
    print(f"invalid: {errors[0].message}")
    sys.exit(1)
print("ok")
