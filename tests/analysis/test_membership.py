"""Members removed and admitted again (cut off by a partition, or restarted), named for the report."""

from __future__ import annotations

from analysis.membership import describe, rejoins

A, B, C, D = (f"127.0.0.1:{5000 + i}" for i in range(4))


def view(k: int, members, removed=()) -> dict:
    return {"view": k, "members": list(members), "removed": list(removed), "variants": 1}


def test_a_peer_cut_off_then_admitted_again_is_named_with_its_cut_and_its_return():
    views = [view(1, [A, B, C, D]), view(2, [A, B, C], removed=[D]), view(3, [A, B, C]),
             view(4, [A, B, C, D])]
    assert rejoins(views) == [{"peer": D, "last_view": 1, "removed_by": 2, "admitted_in": 4}]
    assert describe(rejoins(views)[0]) == (
        f"{D}: member until view 1 (removed by view 2), admitted again in view 4; owed view 1 up to "
        f"its cut and every view from 4 on")


def test_a_restart_admitted_in_the_view_that_removes_its_old_self_counts():
    views = [view(1, [A, B]), view(2, [A, B], removed=[B])]
    assert rejoins(views) == [{"peer": B, "last_view": 1, "removed_by": 2, "admitted_in": 2}]


def test_removed_for_good_left_or_never_removed_are_not_rejoins():
    views = [view(1, [A, B, C]), view(2, [A, B], removed=[C]), view(3, [A]), view(4, [A, D])]
    assert rejoins(views) == []  # C crashed for good; B left (not removed); D only joined


def test_two_cuts_of_the_same_peer_and_views_missing_from_the_input():
    views = [view(1, [A, B, C]), view(2, [A, B], removed=[C]), view(4, [A, B, C]),
             view(5, [A, C], removed=[B]), view(6, [A, B], removed=[C]), view(9, [A, B, C])]
    assert rejoins(views) == [
        {"peer": C, "last_view": 1, "removed_by": 2, "admitted_in": 4},
        {"peer": B, "last_view": 4, "removed_by": 5, "admitted_in": 6},
        {"peer": C, "last_view": 5, "removed_by": 6, "admitted_in": 9},
    ]
