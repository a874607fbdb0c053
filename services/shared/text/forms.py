"""Traffic line forms: detect each line's form and normalize it into one `TrafficRecord`.

Three forms, detected per line by their key, first match wins (docs/profiler.md#traffic-forms). A
line that breaks a rule raises `LineError(kind, reason)` and the caller counts it. This is the hot
path of a million-line file: it touches only the keys it needs and builds one slotted object per line.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Literal

Form = Literal["openai", "sharegpt", "flat"]
FORMS: tuple[Form, ...] = ("openai", "sharegpt", "flat")

# Rejection kinds, as counted in `records.rejected_by_kind` (documented in docs/profiler.md).
NOT_JSON = "not_json"
NOT_OBJECT = "not_object"
UNKNOWN_FORM = "unknown_form"
WRONG_TYPE = "wrong_type"
NEGATIVE_COUNT = "negative_count"
BAD_TIME = "bad_time"
MISSING_FIELD = "missing_field"
BAD_VALUE = "bad_value"
REJECT_KINDS = (NOT_JSON, NOT_OBJECT, UNKNOWN_FORM, WRONG_TYPE, NEGATIVE_COUNT, BAD_TIME, MISSING_FIELD, BAD_VALUE)

# No request has a billion tokens; a count above this is a corrupt line.
MAX_COUNT = 1_000_000_000

# ShareGPT speakers -> chat roles. function_call/observation are the tool-use
# turns of ShareGPT-style function-calling datasets.
_SHAREGPT_ROLES = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "function_call": "assistant",
    "observation": "tool",
}
_TOOL_SPEAKERS = frozenset({"tool", "function_call", "observation"})


class LineError(Exception):
    """One traffic line is not a valid record; `kind` is one of REJECT_KINDS."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


class TrafficRecord:
    """One request, normalized. Token counts are those the line carried (None: absent).

    Invariants: counts are >= 0; latency_s >= 0; `prompt_text` is the prompt
    side's text joined by newlines ("" when the line carried only counts).
    """

    __slots__ = (
        "form",
        "messages",
        "prompt_text",
        "completion_text",
        "input_tokens",
        "output_tokens",
        "prompt_token_ids",
        "start_s",
        "latency_s",
        "uses_tools",
        "wants_json",
    )

    def __init__(
        self,
        form: Form,
        messages: list[dict[str, str]],
        prompt_text: str,
        completion_text: str | None,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        start_s: float | None = None,
        latency_s: float | None = None,
        uses_tools: bool = False,
        wants_json: bool = False,
        prompt_token_ids: int | None = None,
    ) -> None:
        self.form = form
        self.messages = messages
        self.prompt_text = prompt_text
        self.completion_text = completion_text
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.prompt_token_ids = prompt_token_ids  # length of a token-ID prompt, if that is what it was
        self.start_s = start_s
        self.latency_s = latency_s
        self.uses_tools = uses_tools
        self.wants_json = wants_json


def parse_object(obj: Any) -> TrafficRecord:
    """Detect the form of one decoded JSON value and normalize it."""
    if type(obj) is not dict:
        raise LineError(NOT_OBJECT, f"the line is a JSON {_json_type(obj)}, not an object")
    if "request" in obj:
        return _parse_openai(obj)
    if "conversations" in obj:
        return _parse_sharegpt(obj)
    if "prompt" in obj:
        return _parse_flat(obj)
    raise LineError(
        UNKNOWN_FORM,
        "none of the traffic forms: expected a 'request' (OpenAI-style log), 'conversations' (ShareGPT) "
        "or 'prompt' (flat) key",
    )


# --- forms -----------------------------------------------------------------------


def _parse_flat(obj: dict) -> TrafficRecord:
    prompt = obj["prompt"]
    if type(prompt) is not str:
        raise LineError(WRONG_TYPE, f"'prompt' must be a string, not a {_json_type(prompt)}")
    completion = obj.get("completion")
    if completion is not None and type(completion) is not str:
        raise LineError(WRONG_TYPE, f"'completion' must be a string, not a {_json_type(completion)}")
    input_tokens = _count(obj, "input_tokens")
    output_tokens = _count(obj, "output_tokens")
    if not prompt and input_tokens is None:
        raise LineError(MISSING_FIELD, "'prompt' is empty and there is no 'input_tokens'")
    start = obj.get("arrival_time")
    if start is not None:
        start = _time(start, "arrival_time")
    latency = _latency(obj)
    return TrafficRecord(
        "flat", [{"role": "user", "content": prompt}], prompt, completion, input_tokens=input_tokens,
        output_tokens=output_tokens, start_s=start, latency_s=latency,
    )


def _parse_sharegpt(obj: dict) -> TrafficRecord:
    turns = obj["conversations"]
    if type(turns) is not list:
        raise LineError(WRONG_TYPE, f"'conversations' must be a list, not a {_json_type(turns)}")
    messages: list[dict[str, str]] = []
    uses_tools = False
    last_reply = -1
    for i, turn in enumerate(turns):
        if type(turn) is not dict:
            raise LineError(WRONG_TYPE, f"conversations[{i}] must be an object, not a {_json_type(turn)}")
        speaker, value = turn.get("from"), turn.get("value")
        if type(speaker) is not str or type(value) is not str:
            raise LineError(WRONG_TYPE, f"conversations[{i}] needs string 'from' and 'value'")
        role = _SHAREGPT_ROLES.get(speaker)
        if role is None:
            raise LineError(BAD_VALUE, f"conversations[{i}].from is not one of {sorted(_SHAREGPT_ROLES)}")
        uses_tools = uses_tools or speaker in _TOOL_SPEAKERS
        if speaker in ("gpt", "assistant"):
            last_reply = i
        messages.append({"role": role, "content": value})
    completion: str | None = None
    if last_reply >= 0:
        completion = messages[last_reply]["content"]
        messages = messages[:last_reply]
    if not any(m["role"] == "user" for m in messages):
        raise LineError(MISSING_FIELD, "'conversations' has no human turn before the last gpt turn")
    prompt_text = "\n".join(m["content"] for m in messages)
    return TrafficRecord("sharegpt", messages, prompt_text, completion, uses_tools=uses_tools)


def _parse_openai(obj: dict) -> TrafficRecord:
    request = obj["request"]
    if type(request) is not dict:
        raise LineError(WRONG_TYPE, f"'request' must be an object, not a {_json_type(request)}")
    uses_tools = bool(request.get("tools") or request.get("functions"))
    fmt = request.get("response_format")
    wants_json = type(fmt) is dict and str(fmt.get("type", "")).startswith("json")
    token_ids: int | None = None
    if "messages" in request:
        messages, history_tools = _openai_messages(request["messages"])
        uses_tools = uses_tools or history_tools
        prompt_text = "\n".join(m["content"] for m in messages)
    elif "prompt" in request:
        prompt_text, token_ids = _openai_prompt(request["prompt"])
        messages = [{"role": "user", "content": prompt_text}]
    else:
        raise LineError(MISSING_FIELD, "'request' has neither 'messages' nor 'prompt'")

    completion: str | None = None
    input_tokens = output_tokens = None
    response = obj.get("response")
    if response is not None:
        if type(response) is not dict:
            raise LineError(WRONG_TYPE, f"'response' must be an object, not a {_json_type(response)}")
        completion, reply_tools = _openai_completion(response.get("choices"))
        uses_tools = uses_tools or reply_tools
        usage = response.get("usage")
        if usage is not None:
            if type(usage) is not dict:
                raise LineError(WRONG_TYPE, f"'response.usage' must be an object, not a {_json_type(usage)}")
            input_tokens = _count(usage, "prompt_tokens", "response.usage.")
            output_tokens = _count(usage, "completion_tokens", "response.usage.")
    if input_tokens is None and token_ids is not None:
        input_tokens = token_ids
    if not prompt_text and input_tokens is None:
        raise LineError(MISSING_FIELD, "the request's prompt is empty and 'response.usage.prompt_tokens' is absent")

    start = obj.get("timestamp")
    if start is not None:
        start = _time(start, "timestamp")
    latency = _latency(obj)
    if latency is None and obj.get("end_timestamp") is not None:
        end = _time(obj["end_timestamp"], "end_timestamp")
        if start is None:
            raise LineError(MISSING_FIELD, "'end_timestamp' needs a 'timestamp'")
        if end < start:
            raise LineError(BAD_TIME, "'end_timestamp' is before 'timestamp'")
        latency = end - start
    return TrafficRecord(
        "openai", messages, prompt_text, completion, input_tokens=input_tokens, output_tokens=output_tokens,
        start_s=start, latency_s=latency, uses_tools=uses_tools, wants_json=wants_json,
    )


def _openai_messages(messages: Any) -> tuple[list[dict[str, str]], bool]:
    if type(messages) is not list:
        raise LineError(WRONG_TYPE, f"'request.messages' must be a list, not a {_json_type(messages)}")
    out: list[dict[str, str]] = []
    uses_tools = False
    for i, message in enumerate(messages):
        if type(message) is not dict or type(message.get("role")) is not str:
            raise LineError(WRONG_TYPE, f"request.messages[{i}] must be an object with a string 'role'")
        role = message["role"]
        uses_tools = uses_tools or role in ("tool", "function") or bool(message.get("tool_calls"))
        out.append({"role": role, "content": _content_text(message.get("content"), f"request.messages[{i}]")})
    if not out:
        raise LineError(MISSING_FIELD, "'request.messages' is empty")
    return out, uses_tools


def _content_text(content: Any, where: str) -> str:
    """A message's text: a string, null (a tool-call turn) or a list of typed parts."""
    if content is None:
        return ""
    if type(content) is str:
        return content
    if type(content) is list:
        # Only text parts carry text; image/audio parts are not counted (documented).
        return "\n".join(p["text"] for p in content if type(p) is dict and type(p.get("text")) is str)
    raise LineError(WRONG_TYPE, f"{where}.content must be a string, a list of parts or null")


def _openai_prompt(prompt: Any) -> tuple[str, int | None]:
    if type(prompt) is str:
        return prompt, None
    if type(prompt) is list and all(type(p) is str for p in prompt):
        return "\n".join(prompt), None
    if type(prompt) is list and all(type(p) is int for p in prompt):
        return "", len(prompt)  # a token-ID prompt: its length is its count
    raise LineError(WRONG_TYPE, "'request.prompt' must be a string, a list of strings or a list of token IDs")


def _openai_completion(choices: Any) -> tuple[str | None, bool]:
    if choices is None:
        return None, False
    if type(choices) is not list:
        raise LineError(WRONG_TYPE, f"'response.choices' must be a list, not a {_json_type(choices)}")
    if not choices:
        return None, False
    first = choices[0]
    if type(first) is not dict:
        raise LineError(WRONG_TYPE, "response.choices[0] must be an object")
    message = first.get("message")
    if type(message) is dict:
        tools = bool(message.get("tool_calls") or message.get("function_call"))
        return _content_text(message.get("content"), "response.choices[0].message"), tools
    text = first.get("text")
    if text is None or type(text) is str:
        return text, False
    raise LineError(WRONG_TYPE, "response.choices[0].text must be a string")


# --- fields ----------------------------------------------------------------------


def _count(obj: dict, key: str, prefix: str = "") -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    kind = type(value)
    if kind is float and value.is_integer():  # 12.0 from a dataframe dump is still 12
        value = int(value)
    elif kind is not int:  # bool is a subclass of int but not a count: `type() is` refuses it
        raise LineError(WRONG_TYPE, f"'{prefix}{key}' must be an integer, not a {_json_type(value)}")
    if value < 0:
        raise LineError(NEGATIVE_COUNT, f"'{prefix}{key}' is negative ({value})")
    if value > MAX_COUNT:  # also keeps the count inside the profiler's 64-bit columns
        raise LineError(BAD_VALUE, f"'{prefix}{key}' is implausibly large (over {MAX_COUNT:,} tokens)")
    return value


def _latency(obj: dict) -> float | None:
    value = obj.get("latency_s")
    if value is None:
        return None
    if type(value) not in (int, float):
        raise LineError(WRONG_TYPE, f"'latency_s' must be a number, not a {_json_type(value)}")
    if not math.isfinite(value) or value < 0:
        raise LineError(BAD_TIME, f"'latency_s' must be a finite number >= 0 (got {value})")
    return float(value)


def _time(value: Any, key: str) -> float:
    """Epoch seconds from a number, a numeric string or ISO-8601 (naive means UTC)."""
    kind = type(value)
    if kind is int or kind is float:
        if not math.isfinite(value):
            raise LineError(BAD_TIME, f"'{key}' must be finite")
        return float(value)
    if kind is not str:
        raise LineError(WRONG_TYPE, f"'{key}' must be ISO-8601 or epoch seconds, not a {_json_type(value)}")
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds):
            raise LineError(BAD_TIME, f"'{key}' must be finite")
        return seconds
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise LineError(BAD_TIME, f"'{key}' is neither ISO-8601 nor epoch seconds") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"
