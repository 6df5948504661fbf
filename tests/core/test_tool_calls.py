import pytest

from palaestra.core.tool_calls import ToolCall, format_tool_call, parse_tool_calls, tool_format


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


PYTHON = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run code.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
    },
}
SEARCH = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search.",
        "parameters": {
            "type": "object",
            "properties": {"query": {"type": "string"}},
            "required": ["query"],
        },
    },
}


def test_tag_format_reads_several_calls_and_reports_unclosed_tags():
    from palaestra.core.tool_calls import tool_format

    tags = tool_format("tags")
    parsed = tags.parse(
        "<search>a b</search> then <python>\nprint(1)\n</python><search>x", [PYTHON, SEARCH]
    )
    assert parsed.calls == [
        ToolCall("search", {"query": "a b"}),
        ToolCall("python", {"code": "print(1)"}),
    ]
    assert parsed.errors == ["<search> is not closed with </search>"]
    assert tags.parse("<python>1</python>", [SEARCH]).calls == []  # not a tool of this env
    assert tags.format(ToolCall("search", {"query": "q"}), [SEARCH]) == "<search>q</search>"
    assert "<search>query</search>" in tags.instructions([SEARCH])


def test_fenced_format_runs_python_blocks_only():
    from palaestra.core.tool_calls import tool_format

    fenced = tool_format("fenced")
    text = "Compute:\n```python\nprint(2)\n```\nand ```js\nx\n```"
    assert fenced.parse(text, [PYTHON]).calls == [ToolCall("python", {"code": "print(2)\n"})]
    assert fenced.parse(text, [SEARCH]).calls == []


def test_formats_are_a_registry_with_clear_errors():
    from palaestra.core.tool_calls import HermesFormat, register_tool_format, tool_format

    with pytest.raises(ValueError, match="unknown tool-call format 'xml'; choose one of"):
        tool_format("xml")
    with pytest.raises(ValueError, match="already registered"):
        register_tool_format(HermesFormat())


LLAMA_CALL = '{"name": "python", "parameters": {"code": "1"}}'


@pytest.mark.parametrize(
    "text",
    [
        f"<tool_call>{LLAMA_CALL}</tool_call>",
        LLAMA_CALL,
        f"<|python_tag|>{LLAMA_CALL}",
        f"  {LLAMA_CALL}\n",
    ],
)
def test_llama_style_json_calls_are_read(text: str) -> None:
    """Llama 3.1 writes ``"parameters"`` and may send the JSON alone: the default format reads
    both, with the arguments."""
    assert parse_tool_calls(text).calls == [ToolCall("python", {"code": "1"})]


def test_the_llama_format_reads_several_calls_and_round_trips() -> None:
    llama = tool_format("llama")
    first, second = ToolCall("python", {"code": "1"}), ToolCall("search", {"q": "x"})
    text = f"{llama.format(first)}\n{llama.format(second)}"
    assert llama.parse(text).calls == [first, second]
    assert llama.parse(f"{llama.format(first)}; {llama.format(second)}").calls == [first, second]
    assert "parameters" in llama.instructions([PYTHON])


def test_json_in_prose_is_no_call_and_a_malformed_one_says_how_to_write_it() -> None:
    assert not parse_tool_calls(f"The call would be {LLAMA_CALL}, I think.")
    assert not parse_tool_calls('{"name": "Ada"}')  # an answer that is JSON, not a call
    (error,) = parse_tool_calls('{"name": "python", "parameters": 3}').errors
    assert error.count("\n") == 0 and '"parameters": <JSON object>' in error
