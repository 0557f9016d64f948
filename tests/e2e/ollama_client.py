"""Drives a tandem server with the official `ollama` Python client (PyPI, pinned in
tests/e2e/python-requirements.txt) and prints what it saw as one JSON object; the
assertions live in compat.test.mjs, which compares it with the OpenAI routes.

usage: ollama_client.py BASE_URL API_KEY MODEL
"""
import json
import sys

import ollama

base_url, api_key, model = sys.argv[1:4]
client = ollama.Client(host=base_url, headers={"Authorization": f"Bearer {api_key}"})
PROMPT = "Call me Ishmael. Some years ago, never mind how long precisely,"
CHAT = [{"role": "user", "content": "Tell me about the whale and the sea."}]
greedy = {"num_predict": 8, "temperature": 0}
out = {}

out["version"] = client._request_raw("GET", "/api/version").json()["version"]
out["tags"] = [m.model for m in client.list().models]
show = client.show(model + ":latest")
out["show"] = {
    "architecture": show.modelinfo["general.architecture"],
    "capabilities": list(show.capabilities or []),
    "template": show.template,
}
out["ps"] = [m.model for m in client.ps().models]

r = client.generate(model=model, prompt=PROMPT, raw=True, options=greedy)
out["generate_raw"] = {k: getattr(r, k) for k in
                       ("response", "done", "done_reason", "eval_count", "prompt_eval_count", "total_duration")}
chunks = list(client.generate(model=model, prompt=PROMPT, raw=True, options=greedy, stream=True))
out["generate_stream"] = {
    "text": "".join(c.response for c in chunks),
    "chunks": len(chunks),
    "last": {"done": chunks[-1].done, "eval_count": chunks[-1].eval_count},
}
r = client.generate(model=model, prompt=CHAT[0]["content"], options=greedy)
out["generate_templated"] = {"response": r.response}

r = client.chat(model=model, messages=CHAT, options=greedy)
out["chat"] = {"message": {"role": r.message.role, "content": r.message.content},
               "prompt_eval_count": r.prompt_eval_count, "done_reason": r.done_reason}
chunks = list(client.chat(model=model, messages=CHAT, options=greedy, stream=True))
out["chat_stream"] = {
    "text": "".join(c.message.content or "" for c in chunks),
    "last": {"done": chunks[-1].done, "done_reason": chunks[-1].done_reason},
}
seeded = {"num_predict": 8, "temperature": 0.9, "seed": 42}
out["seeded"] = [client.generate(model=model, prompt=PROMPT, raw=True, options=seeded).response for _ in range(2)]

# format: a JSON Schema (bounded strings, so the tiny model finishes) and "json".
PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "age": {"type": "integer"},
        "role": {"enum": ["captain", "mate", "harpooneer"]},
    },
    "required": ["name", "age", "role"],
}
ASK = [{"role": "user", "content": "Tell me about the captain of the ship."}]
r = client.chat(model=model, messages=ASK, format=PERSON, options={"num_predict": 200, "temperature": 0})
out["format_schema"] = {"schema": PERSON, "content": r.message.content, "done_reason": r.done_reason}
# "json" bounds no string: the tiny model mostly writes one until num_predict; this seed closes the object.
r = client.generate(model=model, prompt=ASK[0]["content"], format="json",
                    options={"num_predict": 200, "temperature": 1.0, "seed": 5})
out["format_json"] = {"response": r.response, "done_reason": r.done_reason}

texts = ["The whale", "Call me Ishmael."]
out["embed"] = client.embed(model=model, input=texts).embeddings
out["embed_one"] = client.embed(model=model, input=texts[1]).embeddings
out["embeddings_legacy"] = client.embeddings(model=model, prompt=texts[0]).embedding

try:
    client.generate(model="no-such-model", prompt=PROMPT)
    out["unknown_model_status"] = 200
except ollama.ResponseError as e:
    out["unknown_model_status"] = e.status_code
try:
    client.generate(model=model, prompt=PROMPT, options={"temperature": "hot"})
    out["bad_option_status"] = 200
except ollama.ResponseError as e:
    out["bad_option_status"] = e.status_code

print(json.dumps(out))
