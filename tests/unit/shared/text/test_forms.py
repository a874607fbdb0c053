"""Per-line form detection and normalization, and every bad-line kind."""

from __future__ import annotations

import pytest

from services.shared.text import forms
from services.shared.text.forms import LineError, parse_object


def openai_line(**over):
    line = {
        "timestamp": "2024-05-01T12:00:00Z",
        "request": {"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                               {"role": "user", "content": "hello there"}], "max_tokens": 64},
        "response": {"choices": [{"message": {"role": "assistant", "content": "hi!"}}],
                     "usage": {"prompt_tokens": 12, "completion_tokens": 3}},
        "latency_s": 0.5,
    }
    line.update(over)
    return line


def test_openai_log_is_normalized():
    rec = parse_object(openai_line())
    assert rec.form == "openai"
    assert rec.messages == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}]
    assert rec.prompt_text == "be brief\nhello there"
    assert rec.completion_text == "hi!"
    assert (rec.input_tokens, rec.output_tokens) == (12, 3)
    assert rec.start_s == 1714564800.0
    assert rec.latency_s == 0.5
    assert not rec.uses_tools


def test_openai_epoch_timestamp_and_end_timestamp_give_latency():
    line = openai_line(timestamp=1000.0, end_timestamp="1002.5")
    del line["latency_s"]
    rec = parse_object(line)
    assert rec.start_s == 1000.0
    assert rec.latency_s == pytest.approx(2.5)


def test_openai_iso_end_timestamp_and_naive_iso_is_utc():
    line = openai_line(timestamp="2024-05-01T12:00:00", end_timestamp="2024-05-01T12:00:03+00:00")
    del line["latency_s"]
    rec = parse_object(line)
    assert rec.start_s == 1714564800.0
    assert rec.latency_s == pytest.approx(3.0)


def test_openai_completion_prompt_text_parts_and_tools():
    line = openai_line(
        request={"model": "m", "prompt": "complete this", "tools": [{"type": "function"}]},
        response={"choices": [{"text": "done"}]},
    )
    rec = parse_object(line)
    assert rec.prompt_text == "complete this"
    assert rec.completion_text == "done"
    assert rec.input_tokens is None and rec.output_tokens is None
    assert rec.uses_tools

    parts = openai_line(request={"messages": [{"role": "user", "content": [
        {"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]}]})
    assert parse_object(parts).prompt_text == "look"

    token_ids = openai_line(request={"prompt": [1, 2, 3, 4]}, response=None)
    rec = parse_object(token_ids)
    assert rec.input_tokens == 4 and rec.completion_text is None


def test_openai_reply_tool_calls_and_json_format_are_flagged():
    rec = parse_object(openai_line(response={"choices": [{"message": {"content": None, "tool_calls": [{"id": "1"}]}}]}))
    assert rec.uses_tools and rec.completion_text == ""
    rec = parse_object(openai_line(request={"messages": [{"role": "user", "content": "x"}],
                                            "response_format": {"type": "json_object"}}))
    assert rec.wants_json


def test_flat_with_and_without_counts():
    rec = parse_object({"prompt": "p", "completion": "c", "input_tokens": 5, "output_tokens": 7.0,
                        "arrival_time": 3.0, "latency_s": 1})
    assert rec.form == "flat"
    assert (rec.input_tokens, rec.output_tokens, rec.start_s, rec.latency_s) == (5, 7, 3.0, 1.0)
    bare = parse_object({"prompt": "just a prompt"})
    assert bare.completion_text is None and bare.input_tokens is None and bare.start_s is None
    counts_only = parse_object({"prompt": "", "input_tokens": 9, "output_tokens": 2})
    assert counts_only.prompt_text == "" and counts_only.input_tokens == 9


def test_sharegpt_prompt_is_everything_before_the_last_gpt_turn():
    rec = parse_object({"conversations": [
        {"from": "system", "value": "sys"},
        {"from": "human", "value": "q1"},
        {"from": "gpt", "value": "a1"},
        {"from": "human", "value": "q2"},
        {"from": "gpt", "value": "a2"},
    ]})
    assert rec.form == "sharegpt"
    assert [m["role"] for m in rec.messages] == ["system", "user", "assistant", "user"]
    assert rec.prompt_text == "sys\nq1\na1\nq2"
    assert rec.completion_text == "a2"
    tools = parse_object({"conversations": [{"from": "human", "value": "q"}, {"from": "function_call", "value": "{}"},
                                            {"from": "observation", "value": "r"}, {"from": "gpt", "value": "a"}]})
    assert tools.uses_tools
    no_reply = parse_object({"conversations": [{"from": "human", "value": "q"}]})
    assert no_reply.completion_text is None


def test_detection_precedence_request_over_conversations_over_prompt():
    both = openai_line(prompt="flat prompt", conversations=[])
    assert parse_object(both).form == "openai"
    assert parse_object({"conversations": [{"from": "human", "value": "q"}], "prompt": "x"}).form == "sharegpt"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ([1, 2], forms.NOT_OBJECT),
        ("a string", forms.NOT_OBJECT),
        (3, forms.NOT_OBJECT),
        (None, forms.NOT_OBJECT),
        ({"text": "hello"}, forms.UNKNOWN_FORM),
        ({}, forms.UNKNOWN_FORM),
        ({"prompt": 5}, forms.WRONG_TYPE),
        ({"prompt": "p", "completion": ["c"]}, forms.WRONG_TYPE),
        ({"prompt": "p", "input_tokens": "12"}, forms.WRONG_TYPE),
        ({"prompt": "p", "input_tokens": True}, forms.WRONG_TYPE),
        ({"prompt": "p", "output_tokens": 1.5}, forms.WRONG_TYPE),
        ({"prompt": "p", "input_tokens": -1}, forms.NEGATIVE_COUNT),
        ({"prompt": "p", "output_tokens": -3}, forms.NEGATIVE_COUNT),
        ({"prompt": "p", "output_tokens": 2**62}, forms.BAD_VALUE),
        ({"prompt": "p", "latency_s": -0.1}, forms.BAD_TIME),
        ({"prompt": "p", "latency_s": "1s"}, forms.WRONG_TYPE),
        ({"prompt": "p", "arrival_time": "yesterday"}, forms.BAD_TIME),
        ({"prompt": "p", "arrival_time": "nan"}, forms.BAD_TIME),
        ({"prompt": "p", "arrival_time": [1]}, forms.WRONG_TYPE),
        ({"prompt": ""}, forms.MISSING_FIELD),
        ({"conversations": "q"}, forms.WRONG_TYPE),
        ({"conversations": ["q"]}, forms.WRONG_TYPE),
        ({"conversations": [{"from": "human", "value": 3}]}, forms.WRONG_TYPE),
        ({"conversations": [{"from": "robot", "value": "q"}]}, forms.BAD_VALUE),
        ({"conversations": [{"from": "gpt", "value": "a"}]}, forms.MISSING_FIELD),
        ({"conversations": []}, forms.MISSING_FIELD),
        ({"request": "hello"}, forms.WRONG_TYPE),
        ({"request": {"model": "m"}}, forms.MISSING_FIELD),
        ({"request": {"messages": []}}, forms.MISSING_FIELD),
        ({"request": {"messages": "hi"}}, forms.WRONG_TYPE),
        ({"request": {"messages": [{"content": "no role"}]}}, forms.WRONG_TYPE),
        ({"request": {"messages": [{"role": "user", "content": 7}]}}, forms.WRONG_TYPE),
        ({"request": {"prompt": {"a": 1}}}, forms.WRONG_TYPE),
        ({"request": {"prompt": "p"}, "response": []}, forms.WRONG_TYPE),
        ({"request": {"prompt": "p"}, "response": {"choices": {}}}, forms.WRONG_TYPE),
        ({"request": {"prompt": "p"}, "response": {"usage": {"prompt_tokens": -5}}}, forms.NEGATIVE_COUNT),
        ({"request": {"prompt": "p"}, "response": {"usage": {"completion_tokens": "4"}}}, forms.WRONG_TYPE),
        ({"request": {"prompt": "p"}, "timestamp": "not a time"}, forms.BAD_TIME),
        ({"request": {"prompt": "p"}, "timestamp": 10, "end_timestamp": 5}, forms.BAD_TIME),
        ({"request": {"prompt": "p"}, "end_timestamp": 5}, forms.MISSING_FIELD),
        ({"request": {"prompt": ""}}, forms.MISSING_FIELD),
    ],
)
def test_bad_lines_raise_their_kind(value, kind):
    with pytest.raises(LineError) as err:
        parse_object(value)
    assert err.value.kind == kind
    assert err.value.kind in forms.REJECT_KINDS
    assert err.value.reason
