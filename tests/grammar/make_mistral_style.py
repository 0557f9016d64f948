#!/usr/bin/env python3
"""Writes a Mistral-style tokenizer and chat template for the tool-call tests, and the
golden renders of that template by transformers' apply_chat_template.

tests/fixtures/mistral-style/ gets the bundled models' tokenizer (models/tandem-target)
with one change: id 8191 (the product of the last merge, which no merge uses) becomes the
special token [TOOL_CALLS], as in Mistral's tokenizers, where the detokenizer skips it.
Its tokenizer_config.json carries a chat template written for these tests in Mistral's
tool syntax ([AVAILABLE_TOOLS] ..., [TOOL_CALLS] [{"name", "arguments"}, ...],
[TOOL_RESULTS] ...). The e2e tests serve the bundled weights with these files.

tests/grammar/golden/mistral_style_renders.json: the template rendered by transformers
(PreTrainedTokenizerFast.apply_chat_template, tokenize=False) for the conversations
below, and the ids transformers gives a call's text (the marker must be one token)."""
import json
import os
import shutil
import tempfile

from transformers import PreTrainedTokenizerFast

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
out_dir = os.path.join(root, "tests/fixtures/mistral-style")
bundled = os.path.join(root, "models/tandem-target")
MARKER, MARKER_ID = "[TOOL_CALLS]", 8191

TEMPLATE = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if tools and loop.last %}
            {{- '[AVAILABLE_TOOLS] ' + (tools | tojson) + '[/AVAILABLE_TOOLS]' }}
        {%- endif %}
        {%- if system_message is defined and loop.last %}
            {{- '[INST] ' + system_message + '\n\n' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST] ' + message['content'] + '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] %}
        {{- '[TOOL_CALLS] [' }}
        {%- for call in message['tool_calls'] %}
            {{- '{"name": ' + (call['function']['name'] | tojson) + ', "arguments": ' + (call['function']['arguments'] | tojson) + '}' }}
            {%- if not loop.last %}
                {{- ', ' }}
            {%- endif %}
        {%- endfor %}
        {{- ']' + eos_token }}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token }}
    {%- elif message['role'] == 'tool' %}
        {{- '[TOOL_RESULTS] {"call_id": ' + (message['tool_call_id'] | tojson) + ', "content": ' + (message['content'] | tojson) + '}[/TOOL_RESULTS]' }}
    {%- endif %}
{%- endfor %}
"""

tok = json.load(open(os.path.join(bundled, "tokenizer.json")))
vocab = tok["model"]["vocab"]
last = tok["model"]["merges"][-1]
last = last if isinstance(last, list) else last.split(" ")
gone = [s for s, i in vocab.items() if i == MARKER_ID]
assert gone == ["".join(last)], (gone, last)
del vocab[gone[0]]
tok["model"]["merges"].pop()
tok["added_tokens"].append({"id": MARKER_ID, "content": MARKER, "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True})
config = json.load(open(os.path.join(bundled, "tokenizer_config.json")))
config["chat_template"] = TEMPLATE
config["added_tokens_decoder"][str(MARKER_ID)] = {"content": MARKER, "lstrip": False, "normalized": False,
                                                  "rstrip": False, "single_word": False, "special": True}
config["additional_special_tokens"] = config.get("additional_special_tokens", []) + [MARKER]
os.makedirs(out_dir, exist_ok=True)
json.dump(tok, open(os.path.join(out_dir, "tokenizer.json"), "w"), ensure_ascii=False)
json.dump(config, open(os.path.join(out_dir, "tokenizer_config.json"), "w"), ensure_ascii=False, indent=1)

tokenizer = PreTrainedTokenizerFast.from_pretrained(out_dir)
assert tokenizer.convert_tokens_to_ids(MARKER) == MARKER_ID

weather = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                          "required": ["city"]}}}
clock = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
call = lambda i, name, args: {"id": i, "type": "function", "function": {"name": name, "arguments": args}}
cases = [
    {"messages": [{"role": "user", "content": "Call me Ishmael."}]},
    {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [weather, clock]},
    {"messages": [{"role": "system", "content": "You help sailors."}, {"role": "user", "content": "Paris and time?"},
                  {"role": "assistant", "content": None,
                   "tool_calls": [call("c1", "get_weather", {"city": "Paris", "unit": "c"}), call("c2", "get_time", {})]},
                  {"role": "tool", "tool_call_id": "c1", "content": "sunny, 21"},
                  {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
                  {"role": "assistant", "content": "Sunny, 21 C, at noon."}, {"role": "user", "content": "Thanks"}],
     "tools": [weather, clock]},
]
renders = []
for case in cases:
    text = tokenizer.apply_chat_template(case["messages"], tools=case.get("tools"), tokenize=False,
                                         add_generation_prompt=True)
    renders.append({**case, "add_generation_prompt": True, "render": text})
call_text = MARKER + ' [{"name": "get_time", "arguments": {}}]'
ids = tokenizer.encode(call_text, add_special_tokens=False)
golden = {"renders": renders, "call_text": call_text, "call_ids": ids,
          "call_decoded_keeping_specials": tokenizer.decode(ids, skip_special_tokens=False),
          "call_decoded_skipping_specials": tokenizer.decode(ids, skip_special_tokens=True)}
path = os.path.join(root, "tests/grammar/golden/mistral_style_renders.json")
json.dump(golden, open(path, "w"), ensure_ascii=False, indent=1)
print(f"wrote {out_dir} and {len(renders)} renders to {path}")
