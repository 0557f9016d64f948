#!/usr/bin/env python3
"""LangChain (langchain-openai's ChatOpenAI, pinned in python-requirements.txt) against a
tandem server: with_structured_output (json_schema strict and function calling),
bind_tools with tool_choice required (whole and streamed), and a conversation that sends
the call and its result back. Prints one JSON object of what it got; pydantic validates
the structured outputs, so a reply that does not match its schema fails here.

usage: langchain_client.py BASE_URL API_KEY MODEL"""
import json
import sys
from typing import List, Literal, Optional

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, Field

base_url, api_key, model = sys.argv[1:4]


class Sailor(BaseModel):
    """A member of a ship's crew."""

    name: str = Field(max_length=24)
    age: int = Field(ge=0, le=120)
    role: Literal["captain", "mate", "harpooneer"]
    ships: List[str] = Field(max_length=2)
    alive: Optional[bool]


@tool
def get_weather(city: str, unit: Literal["celsius", "fahrenheit"]) -> str:
    """The weather in a city."""
    return "sunny"


def llm(**kw):
    return ChatOpenAI(base_url=base_url + "/v1", api_key=api_key, model=model, max_retries=0, timeout=120,
                      max_tokens=600, **kw)


out = {}
ask = "Tell me about the captain of the ship."
for method in ("json_schema", "function_calling"):
    sailor = llm(temperature=0).with_structured_output(Sailor, method=method, strict=True).invoke(ask)
    assert isinstance(sailor, Sailor), type(sailor)
    out[method] = sailor.model_dump()
seeded = llm(temperature=0.8, seed=7).with_structured_output(Sailor, method="json_schema", strict=True)
out["json_schema_seeded"] = seeded.invoke(ask).model_dump()
# include_raw: the parsed object next to the raw message, no parsing error.
raw = llm(temperature=0).with_structured_output(Sailor, method="json_schema", include_raw=True).invoke(ask)
assert raw["parsing_error"] is None, raw["parsing_error"]
out["raw_content"] = raw["raw"].content

bound = llm(temperature=0).bind_tools([get_weather], tool_choice="required", parallel_tool_calls=False)
question = [HumanMessage("What is the weather in Paris?")]
msg = bound.invoke(question)
out["tool_calls"] = msg.tool_calls
out["invalid_tool_calls"] = msg.invalid_tool_calls
out["finish_reason"] = msg.response_metadata.get("finish_reason")
chunks = None
for chunk in bound.stream(question):
    chunks = chunk if chunks is None else chunks + chunk
out["streamed_tool_calls"] = chunks.tool_calls
# The call and its result back (an assistant message with content "" and tool_calls, then a tool message).
call = msg.tool_calls[0]
follow = llm(temperature=0, max_completion_tokens=8).bind_tools([get_weather]).invoke(
    question + [AIMessage(content="", tool_calls=[call]), ToolMessage("sunny, 21 degrees", tool_call_id=call["id"])])
out["follow_up_type"] = type(follow.content).__name__
print(json.dumps(out))
