"""Shape-level extraction: reasoning, JSON objects, call expressions and strict integers."""

from __future__ import annotations

import contextlib
import time

import pytest

from holodesk.inference.profiles.parsing import (
    MAX_ANSWER_CHARS,
    Call,
    MalformedAnswer,
    decode_json_object,
    find_calls,
    find_json_objects,
    looks_like_call,
    mentioned_call,
    one_json_object,
    parse_call,
    split_reasoning,
    strict_int,
    strict_seconds,
    text_outside,
)

# -- reasoning -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer", "reasoning"),
    [
        ("{}", "{}", ""),
        ("<think>look left</think>{}", "{}", "look left"),
        ("<think>\nline one\nline two\n</think>\n\n{}", "{}", "line one\nline two"),
        ("<THINK>caps</THINK> {}", "{}", "caps"),
        ("template opened it</think>{}", "{}", "template opened it"),
        ("<think>a</think>{}<think>b</think>", "{}", "a\nb"),
        ("<think></think>{}", "{}", ""),
        ("  prose only  ", "prose only", ""),
    ],
)
def test_split_reasoning(text: str, answer: str, reasoning: str) -> None:
    reasoned = split_reasoning(text)
    assert (reasoned.answer, reasoned.reasoning) == (answer, reasoning)


@pytest.mark.parametrize(
    "text",
    [
        '<think>still thinking about {"action": "go_back"}',
        "<think>a</think>{} </think>",
        "<think>a</think> <think>b",
        "x" * (MAX_ANSWER_CHARS + 1),
    ],
)
def test_split_reasoning_refuses(text: str) -> None:
    with pytest.raises(MalformedAnswer):
        split_reasoning(text)


# -- JSON objects ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ('{"a": 1}', [{"a": 1}]),
        ('```json\n{"a": 1}\n```', [{"a": 1}]),
        ('Sure! Here it is:\n{"a": 1}\nHope that helps.', [{"a": 1}]),
        ('{"a": 1,}', [{"a": 1}]),
        ('{"a": [1, 2,],}', [{"a": [1, 2]}]),
        ('{"a": {"b": 2,},\n}', [{"a": {"b": 2}}]),
        ('{"text": "a } brace and a \\" quote {"}', [{"text": 'a } brace and a " quote {'}]),
        ('use {curly} braces, then {"a": 1}', [{"a": 1}]),
        ('{"a": 1} and {"b": 2}', [{"a": 1}, {"b": 2}]),
        ('{"outer": {"inner": {"x": 1}}}', [{"outer": {"inner": {"x": 1}}}]),
        ('[{"a": 1}]', [{"a": 1}]),
        ("no braces at all", []),
        ('{"a": 1', []),
        ("{'a': 1}", []),
    ],
)
def test_find_json_objects(text: str, values: list[dict[str, object]]) -> None:
    assert [found.value for found in find_json_objects(text)] == values


def test_found_object_span_covers_the_original_text_even_after_a_trailing_comma() -> None:
    text = 'before {"a": 1, } after'
    (found,) = find_json_objects(text)
    assert text[found.start : found.end] == '{"a": 1, }'
    assert text_outside(text, [(found.start, found.end)]) == "before \n after"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"x": NaN}', "NaN"),
        ('{"x": Infinity}', "Infinity"),
        ('{"x": -Infinity}', "Infinity"),
        ('{"x": 1e999}', "out of range"),
        ('{"x": 12345678901234567890}', "too large"),
        ('{"x": -12345678901234567890}', "too large"),
        ('{"action": "a", "action": "b"}', "repeats the key"),
        ('{"a": ' + "[" * 5_000 + "}", "deeply"),
    ],
)
def test_json_values_that_are_refused_outright(text: str, message: str) -> None:
    with pytest.raises(MalformedAnswer, match=message):
        find_json_objects(text)


def test_one_json_object() -> None:
    assert one_json_object('x {"a": 1} y').value == {"a": 1}
    with pytest.raises(MalformedAnswer, match="no JSON object"):
        one_json_object("nothing here")
    with pytest.raises(MalformedAnswer, match="2 JSON objects"):
        one_json_object('{"a": 1}{"b": 2}')


@pytest.mark.parametrize(
    ("text", "ok"),
    [('{"x": 1}', True), (' {"x": 1} ', True), ('{"x": 1} {"y": 2}', False), ("[1]", False), ("x", False)],
)
def test_decode_json_object_is_whole_text_only(text: str, ok: bool) -> None:
    if ok:
        assert decode_json_object(text, "arguments") == {"x": 1}
    else:
        with pytest.raises(MalformedAnswer):
            decode_json_object(text, "arguments")


@pytest.mark.parametrize(
    "text",
    ["{" * 60_000, '{"a":' * 12_000, '{"' * 30_000, "{}" * 30_000, '{"a": "' + "x" * 60_000],
)
def test_hostile_text_is_scanned_quickly(text: str) -> None:
    started = time.perf_counter()
    with contextlib.suppress(MalformedAnswer):
        find_json_objects(text)
    assert time.perf_counter() - started < 2.0


# -- calls -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "call"),
    [
        ("go_back", Call("go_back")),
        ("go_back()", Call("go_back")),
        ("  refresh()  ", Call("refresh")),
        ("Click(352, 348)", Call("Click", (352, 348))),
        ('click_element(element="OK", x=10, y=20)', Call("click_element", (), {"element": "OK", "x": 10, "y": 20})),
        ("write('it''s', x=1)", Call("write", ("its",), {"x": 1})),
        ("scroll(down)", Call("scroll", ("down",))),
        ("scroll(direction=down)", Call("scroll", (), {"direction": "down"})),
        ("Click(-5, 2.5)", Call("Click", (-5, 2.5))),
        ('hotkey(keys=["ctrl", "c"])', Call("hotkey", (), {"keys": ["ctrl", "c"]})),
        ('Write("line\\nbreak \\"quoted\\" \\u00e9")', Call("Write", ('line\nbreak "quoted" é',))),
        ("answer(content=None)", Call("answer", (), {"content": None})),
    ],
)
def test_parse_call(source: str, call: Call) -> None:
    assert parse_call(source) == call


@pytest.mark.parametrize(
    "source",
    [
        "f(a=1, a=2)",
        "f(**kwargs)",
        "f(*args)",
        "f(g(1))",
        "f(x=os.system('rm'))",
        "obj.method(1)",
        "f(1",
        "f(x: 1)",
        "f(" + "9" * 5000 + ")",
        "f(2**1000)",
        "f(lambda: 1)",
        "1 + 2",
        "(" * 300 + ")" * 300,
        "f(" + "a" * 20_000 + ")",
    ],
)
def test_parse_call_refuses(source: str) -> None:
    with pytest.raises(MalformedAnswer):
        parse_call(source)


def test_find_calls_skips_calls_inside_string_arguments_and_unknown_names() -> None:
    text = 'Thought: Tap(9, 9) is not ours.\nAction: Write("Click(1, 2) is text", 3, 4)'
    (found,) = find_calls(text, {"Click", "Write"})
    assert found.call == Call("Write", ("Click(1, 2) is text", 3, 4))
    assert text[found.start : found.end] == 'Write("Click(1, 2) is text", 3, 4)'
    assert [f.call.name for f in find_calls("Click(1, 2) then Click(3, 4)", {"Click"})] == ["Click", "Click"]


def test_find_calls_refuses_an_unclosed_call() -> None:
    with pytest.raises(MalformedAnswer, match="never closed"):
        find_calls('Action: Click(1, 2 and "more', {"Click"})


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("then click_desktop(x=1, y=2) too", "click_desktop"),
        ("go_back()", "go_back"),
        ("here is my answer (below)", None),
        ("my_click_desktop(x=1)", None),
        ("obj.go_back()", None),
        ("no calls", None),
        ("write_element(content='a') and write(x)", "write_element"),
    ],
)
def test_mentioned_call(text: str, name: str | None) -> None:
    assert mentioned_call(text, {"click_desktop", "go_back", "answer", "write", "write_element"}) == name


@pytest.mark.parametrize(("text", "expected"), [("f(1)", True), (" go() ", True), ("go", False), ("f(1) and", False)])
def test_looks_like_call(text: str, expected: bool) -> None:
    assert looks_like_call(text) is expected


# -- numbers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (5, 5), (-5, -5), (1000, 1000), (12.0, 12), (-3.0, -3), ("12", 12), (" 7 ", 7), ("0", 0), (1e3, 1000)],
)
def test_strict_int_accepts(value: object, expected: int) -> None:
    assert strict_int(value, "x") == expected


@pytest.mark.parametrize(
    "value",
    [
        True,
        False,
        12.5,
        0.45,
        float("nan"),
        float("inf"),
        "12.0",
        "-5",
        "+5",
        "5px",
        "",
        "1 2",
        None,
        [5],
        {"x": 5},
        "1234567890",
        "١٢",
    ],
)
def test_strict_int_refuses(value: object) -> None:
    with pytest.raises(MalformedAnswer):
        strict_int(value, "x")


@pytest.mark.parametrize(("value", "expected"), [(2, 2.0), (0.5, 0.5), ("3", 3.0), (1.25, 1.25)])
def test_strict_seconds_accepts(value: object, expected: float) -> None:
    assert strict_seconds(value, "seconds") == expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), True, "0.5", None])
def test_strict_seconds_refuses(value: object) -> None:
    with pytest.raises(MalformedAnswer):
        strict_seconds(value, "seconds")


# -- hostile input: nothing mined from a broken object, no runaway numbers, linear tag handling ------


def test_a_broken_object_is_skipped_whole_and_its_inner_objects_are_not_mined() -> None:
    inner = '{"tool_name": "answer", "content": "x"}'
    # the outer object lost its closing brace: everything after its opening brace is inside it
    assert find_json_objects('{"note": null, "tool_call": ' + inner) == []
    # a balanced but invalid span is skipped as a whole; an object after it is still found
    found = find_json_objects('{"note": nope, "tool_call": ' + inner + '} then {"a": 1}')
    assert [f.value for f in found] == [{"a": 1}]
    # prose with braces before the answer does not hide the answer
    assert [f.value for f in find_json_objects('Use {curly} braces: {"a": 2}')] == [{"a": 2}]


@pytest.mark.parametrize("value", [10**9, -(10**9), 10**400])
def test_runaway_integers_are_refused_before_any_arithmetic(value: int) -> None:
    with pytest.raises(MalformedAnswer, match="far too large"):
        strict_int(value, "x")
    with pytest.raises(MalformedAnswer, match="far too large"):  # float() of it would overflow
        strict_seconds(value, "seconds")


@pytest.mark.parametrize(
    ("text", "answer", "reasoning"),
    [
        ("<think>a<think>b</think>c", "c", "a<think>b"),  # an opening tag inside a block is reasoning
        ("a</think>b<think>c</think>d", "b\nd", "a\nc"),
        ("<THINK>x</Think>y", "y", "x"),
    ],
)
def test_reasoning_blocks_are_read_in_one_pass(text: str, answer: str, reasoning: str) -> None:
    reasoned = split_reasoning(text)
    assert (reasoned.answer, reasoned.reasoning) == (answer, reasoning)


@pytest.mark.parametrize("text", ["<think>" * 9_000, "x</think></think>", "<think>a</think></think>b"])
def test_unbalanced_reasoning_tags_are_refused(text: str) -> None:
    with pytest.raises(MalformedAnswer):
        split_reasoning(text)
