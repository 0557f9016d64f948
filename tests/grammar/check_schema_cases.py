#!/usr/bin/env python3
"""Checks tests/grammar/schema_cases.json against Python jsonschema (the trusted
reference): every "valid" string parses and validates, every "invalid" string
fails to parse or to validate, and every "outside_grammar" string is valid JSON
Schema-wise (the grammar excludes it on purpose: property order, whitespace).
Formats are checked with jsonschema's FormatChecker where it knows them."""
import json
import os
import sys

import jsonschema

here = os.path.dirname(os.path.abspath(__file__))
cases = json.load(open(os.path.join(here, "schema_cases.json")))
checker = jsonschema.FormatChecker()
bad = 0
for case in cases:
    validator = jsonschema.Draft202012Validator(case["schema"], format_checker=checker)
    for text in case["valid"] + case["outside_grammar"]:
        errors = list(validator.iter_errors(json.loads(text)))
        if errors:
            print(f"{case['name']}: expected valid: {text}: {errors[0].message}")
            bad += 1
    for text in case["invalid"]:
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            continue
        if validator.is_valid(value):
            print(f"{case['name']}: expected invalid: {text}")
            bad += 1
print("schema cases:", "ok" if bad == 0 else f"{bad} wrong")
sys.exit(1 if bad else 0)
