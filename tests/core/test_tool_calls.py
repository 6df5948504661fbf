from palaestra.core.tool_calls import ToolCall, format_tool_call, parse_tool_calls


def test_parses_calls_in_order_and_round_trips() -> None:
    first, second = ToolCall("python", {"code": "print(1)"}), ToolCall("search", {"q": "é"})
    text = f"think {format_tool_call(first)} then {format_tool_call(second)}"
    assert parse_tool_calls(text).calls == [first, second]


def test_string_encoded_arguments_are_accepted() -> None:
    text = '<tool_call>{"name": "python", "arguments": "{\\"code\\": \\"1\\"}"}</tool_call>'
    assert parse_tool_calls(text).calls == [ToolCall("python", {"code": "1"})]


def test_malformed_calls_are_reported_not_raised() -> None:
    parsed = parse_tool_calls(
        "<tool_call>{not json}</tool_call><tool_call>[1]</tool_call>"
        '<tool_call>{"name": "x", "arguments": 3}</tool_call><tool_call>unclosed'
    )
    assert parsed.calls == []
    assert len(parsed.errors) == 3
    assert "not valid JSON" in parsed.errors[0] and "must be a JSON object" in parsed.errors[2]


def test_no_calls_in_plain_text() -> None:
    parsed = parse_tool_calls("the answer is \\boxed{4}")
    assert parsed.calls == [] and parsed.errors == []
