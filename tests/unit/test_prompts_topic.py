"""The recall prompt's topic put back together from the words a host split it into (Claude Code and Gemini
CLI pass word N of a slash command as argument N, quotes included)."""

from __future__ import annotations

import pytest

from server.activity.prompts import RECALL, TOPIC_WORDS, recall_topic


@pytest.mark.parametrize(
    ("arguments", "topic"),
    [
        ({"topic": "auth"}, "auth"),
        ({"topic": "auth", "word2": "errors"}, "auth errors"),
        ({"topic": '"auth', "word2": 'errors"'}, "auth errors"),
        ({"topic": "'auth", "word2": "errors'"}, "auth errors"),
        ({"topic": '"auth', "word2": "errors"}, "auth errors"),  # a quote left open
        ({"topic": "don't", "word2": "panic"}, "don't panic"),
        ({"topic": "  lamp  oil "}, "lamp oil"),  # a host that sends the whole text in one argument
        ({"word2": "ignored?"}, "ignored?"),
    ],
)
def test_the_topic_is_every_word_in_order_without_the_quotes_that_held_it(
    arguments: dict[str, str], topic: str
) -> None:
    assert recall_topic(arguments) == topic


def test_the_prompt_takes_as_many_words_as_it_says() -> None:
    assert [a.name for a in RECALL.arguments] == ["topic", *(f"word{n}" for n in range(2, TOPIC_WORDS + 1))]
