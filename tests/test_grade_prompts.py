"""The driver's rules (tom.grade.prompts) on the handout's figure 1 and on other wordings."""

import pytest

from tom.grade.prompts import DEFAULT_RULES, PromptRule, decide, loopback_choice, plain, rules_with, tail_lines
from tom.grade.toolfile import parse_output, printed_deliveries

FIGURE_1_START = """Loaded 4 neighbors
Choose an IP address to listen on :
0: /0.0.0.0
1: localhost/127.0.0.1
2: /192.168.56.1
3: /10.9.11.87
: """

AFTER_ADDRESS = """1
Started to listen on ServerSocket[addr=localhost/127.0.0.1,localport=5003]
Sending messages from: localhost/127.0.0.1:5003
Started incoming messages processor.
Started outgoing messages processor.
Choose what to do:
1. Send a new message:
2. Print status
3. Quit
: """

FILL = {"ip": "127.0.0.1", "port": "5003", "menu": None, "text": None}


def test_the_address_question_is_answered_with_the_index_of_loopback():
    d = decide(FIGURE_1_START, DEFAULT_RULES, FILL)
    assert d is not None and d.answer == "1"


def test_without_a_list_the_address_is_typed_out():
    d = decide("Which IP address should I listen on? ", DEFAULT_RULES, FILL)
    assert d is not None and d.answer == "127.0.0.1"


@pytest.mark.parametrize("listing, index", [
    ("0: /0.0.0.0\n1: /192.0.2.2\n2: localhost/127.0.0.1\n", "2"),
    ("[0] 0.0.0.0\n[1] 127.0.0.1\n", "1"),
    ("  3) lo 127.0.0.1\n", "3"),
    ("0: /0.0.0.0\n1: /127.0.0.10\n", "127.0.0.1"),  # 127.0.0.10 is not loopback's line
])
def test_loopback_choice(listing, index):
    assert loopback_choice(listing) == index


def test_the_menu_is_the_last_question_after_start_up_and_means_ready():
    d = decide(AFTER_ADDRESS, DEFAULT_RULES, FILL)
    assert d is not None and d.rule.is_menu and d.answer is None  # nothing wanted: ready
    d = decide(AFTER_ADDRESS, DEFAULT_RULES, {**FILL, "menu": "1"})
    assert d is not None and d.answer == "1"


def test_the_from_question_of_a_tool_listening_on_any_address():
    d = decide("Enter the IP to write in the from field :\n: ", DEFAULT_RULES, FILL)
    assert d is not None and d.answer == "127.0.0.1"


def test_the_text_prompt_takes_the_text_only_when_there_is_one():
    screen = "Enter the message to send : "
    assert decide(screen, DEFAULT_RULES, FILL).answer is None
    assert decide(screen, DEFAULT_RULES, {**FILL, "text": "B1"}).answer == "B1"


def test_a_students_rules_come_first_and_replace_a_default_of_the_same_regex():
    rules = rules_with({r"(?i)pick an interface": "{loopback}", r"(?i)\bquit\b": "{menu}"})
    assert rules[0].pattern == r"(?i)pick an interface"
    assert sum(r.pattern == r"(?i)\bquit\b" for r in rules) == 1
    d = decide("Interfaces:\n a. 0.0.0.0\n b. 127.0.0.1\nPick an interface> ", rules, FILL)
    assert d is not None and d.answer == "127.0.0.1"


def test_a_bad_template_or_regex_is_refused():
    with pytest.raises(ValueError, match="unknown field"):
        PromptRule("x", "{nope}")
    with pytest.raises(Exception):
        PromptRule("(", "1")


def test_plain_and_tail():
    assert plain("\x1b[1mMenu\x1b[0m\r\n: ") == "Menu\n: "
    assert tail_lines("a\r\n\r\nb\nc\n", 2) == ["b", "c"]


def test_output_lines_in_the_verifiers_forms_and_a_students_own():
    found, other = parse_output("3 ACKs on MESSAGE-1-localhost/127.0.0.1:5003-Hello world!\n"
                                "MESSAGE-2-127.0.0.1:5001-x-y\nnoise\n")
    assert [(d.clock, d.sender, d.text, d.acks, d.line_no) for d in found] == [
        (1, "localhost/127.0.0.1:5003", "Hello world!", 3, 1), (2, "127.0.0.1:5001", "x-y", None, 2)]
    assert other == [(3, "noise")]
    own, _ = parse_output("7 127.0.0.1:5000 hi\n", r"^(?P<clock>\d+) (?P<sender>\S+) (?P<text>.*)$")
    assert own[0].text == "hi" and own[0].clock == 7
    with pytest.raises(ValueError, match="named groups"):
        parse_output("", r"^(?P<clock>\d+)$")


def test_printed_deliveries():
    found = printed_deliveries(": Delivered: MESSAGE-1-localhost/127.0.0.1:5003-T1\r\nDelivered: MESSAGE-3-a:1-B1\n")
    assert [d.text for d in found] == ["T1", "B1"]
