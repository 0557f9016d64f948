#!/usr/bin/env python3
"""Renders the bundled chat template (models/tandem-target/tokenizer_config.json)
with Python Jinja2 configured as transformers' apply_chat_template configures it
(trim_blocks, lstrip_blocks, tojson = json.dumps(ensure_ascii=False)), for the
conversations below, into tests/grammar/golden/bundled_template_renders.json.
The assistant tool-call arguments are objects, as tandem passes them (ADR 0020)."""
import json
import os

import jinja2

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
config = json.load(open(os.path.join(root, "models/tandem-target/tokenizer_config.json")))

env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
template = env.from_string(config["chat_template"])

weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                          "required": ["city"]}}}
clock = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
call = lambda i, name, args: {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
cases = [
    {"messages": [{"role": "user", "content": "Call me Ishmael."}]},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                  {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}]},
    {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [weather, clock]},
    {"messages": [{"role": "system", "content": "You help sailors."}, {"role": "user", "content": "Paris and time?"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [call("c1", "get_weather", {"city": "Paris", "unit": "c"}), call("c2", "get_time", {})]},
                  {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21"},
                  {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
                  {"role": "assistant", "content": "Sunny, 21 C, at noon."}, {"role": "user", "content": "Thanks"}],
     "tools": [weather, clock]},
    {"messages": [{"role": "user", "content": "Weather?"},
                  {"role": "assistant", "content": "Let me look.", "tool_calls": [call("c1", "get_weather", {"city": "Oslo"})]},
                  {"role": "tool", "tool_call_id": "c1", "content": "snow"}], "tools": [weather]},
]
out = []
for case in cases:
    for agp in (True, False):
        kwargs = {"messages": case["messages"], "add_generation_prompt": agp, "eos_token": config["eos_token"]}
        if "tools" in case:
            kwargs["tools"] = case["tools"]
        out.append({**case, "add_generation_prompt": agp, "render": template.render(**kwargs)})
path = os.path.join(root, "tests/grammar/golden/bundled_template_renders.json")
json.dump(out, open(path, "w"), ensure_ascii=False, indent=1)
print(f"wrote {len(out)} renders to {path}")
