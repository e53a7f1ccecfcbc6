"""The order the suite's workers take the tests in (tests/conftest.py's `_spread`): the verifier's
groups, then the docs' blocks on the fixed ports, then the end-to-end tests, the other blocks and the
tests that compute spread over each other, the long ones over the first part so that the run ends on
short tests."""

from __future__ import annotations

from types import SimpleNamespace

from conftest import LONG_SPAN, _spread


class Item:
    """Enough of a pytest item for `_spread`: a name, an optional xdist group, an optional e2e mark."""

    def __init__(self, name: str, group: str | None = None, e2e: bool = False) -> None:
        self.name, self.group, self.e2e = name, group, e2e

    def iter_markers(self, name: str):
        return [SimpleNamespace(args=(self.group,))] if name == "xdist_group" and self.group else []

    def get_closest_marker(self, name: str):
        return SimpleNamespace(args=()) if name == "e2e" and self.e2e else None


def test_the_rest_spreads_waiting_tests_over_computing_ones_and_ends_on_short_ones():
    items = ([Item(f"compute{i}") for i in range(40)] + [Item(f"e2e{i}", e2e=True) for i in range(8)]
             + [Item(f"docs{i}", group=f"docs-page{i}") for i in range(2)]
             + [Item("ports", group="docs-ports"), Item("verifier", group="analysis-2"), Item("wheel", group="wheel")])
    order = [item.name for item in _spread(items)]
    assert order[:3] == ["verifier", "ports", "wheel"]
    rest = order[3:]
    assert [n for n in rest if n.startswith("e2e")] == [f"e2e{i}" for i in range(8)]  # each kind keeps its order
    assert [n for n in rest if n.startswith("compute")] == [f"compute{i}" for i in range(40)]
    e2e_at = [i for i, n in enumerate(rest) if n.startswith("e2e")]
    assert max(b - a for a, b in zip(e2e_at, e2e_at[1:])) <= 7  # the end-to-end tests 3 to 7 apart
    assert min(b - a for a, b in zip(e2e_at, e2e_at[1:])) >= 3
    assert max(e2e_at + [i for i, n in enumerate(rest) if n.startswith("docs")]) < LONG_SPAN * len(rest)
    assert rest[-8:] == [f"compute{i}" for i in range(32, 40)]
