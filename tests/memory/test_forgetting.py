"""memory/forgetting.py: which stored lines go with an erased fact."""

from __future__ import annotations

from memory.forgetting import repeats_forgotten

FACT = "Alice's door code is 4711"
SOURCE = "remember that my door code is 4711 please"


def test_the_lines_a_fact_came_from_and_lines_repeating_it_go() -> None:
    texts = [SOURCE, FACT]
    assert repeats_forgotten("remember that  my door code is 4711 please", texts)  # whitespace aside
    assert repeats_forgotten("Saved: Alice's door code is 4711.", texts)  # repeats the fact word for word
    assert repeats_forgotten("remember that my door code", texts)  # a long part of the source


def test_short_or_unrelated_lines_stay() -> None:
    texts = [SOURCE, FACT]
    assert not repeats_forgotten("please", texts)  # inside the source, but a short line is not it
    assert not repeats_forgotten("what's the weather today?", texts)
    assert not repeats_forgotten("   ", texts)
    assert not repeats_forgotten("Alice's door code is", [])
