"""The verifier's space-time picture (`analysis.report.spacetime_svg`): its labels never overlap, however
dense the run, and a run's first divergence is drawn where it happened."""

import re

from analysis.report import LABEL_CHAR_W, spacetime_svg

PEERS = ["127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"]


def dense(n: int) -> list[dict]:
    """``n`` messages sent within a millisecond by three peers, delivered by all (the demo's first 40)."""
    out = []
    for k in range(n):
        pid = PEERS[k % 3]
        out.append({"clock": 100 + k, "pid": pid, "sent_at": 1.0 + k * 1e-5,
                    "deliveries": [{"peer": p, "index": k + 1, "delivered_at": 1.05 + k * 1e-4, "view": 1}
                                   for p in PEERS]})
    return out


def boxes(svg: str) -> list[tuple[float, float, float, float]]:
    """The clock labels' boxes (x1, x2, y1, y2), as the picture places them."""
    out = []
    for x, y, text in re.findall(r'<text class="clock-label" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>', svg):
        w = LABEL_CHAR_W * len(text)
        out.append((float(x) - w / 2, float(x) + w / 2, float(y) - 10, float(y)))
    return out


def test_labels_never_overlap_at_any_density():
    for n in (3, 40, 400):
        placed = boxes(spacetime_svg(dense(n), PEERS))
        assert placed, n
        for i, a in enumerate(placed):
            for b in placed[i + 1:]:
                assert a[1] <= b[0] or b[1] <= a[0] or a[3] <= b[2] or b[3] <= a[2], (n, a, b)
    sparse = spacetime_svg([dict(m, sent_at=1.0 + k) for k, m in enumerate(dense(6))], PEERS)
    assert len(boxes(sparse)) == 6  # room for every label: all drawn


def test_the_first_divergence_is_ringed_and_named():
    run = dense(6)
    run[2]["deliveries"][1]["index"], run[3]["deliveries"][1]["index"] = 4, 3  # 5001 swapped two
    row = {"peer_a": PEERS[0], "peer_b": PEERS[1], "position": 3,
           "at_a": {"clock": 102, "pid": PEERS[2], "index": 3}, "at_b": {"clock": 103, "pid": PEERS[0], "index": 3}}
    svg = spacetime_svg(run, PEERS, divergence=row)
    assert svg.count('class="divergence"') == 2
    assert ("first divergence, position 3: 127.0.0.1:5000 delivered (102, 127.0.0.1:5002) as #3; "
            "127.0.0.1:5001 delivered (103, 127.0.0.1:5000) as #3") in svg
    assert "first divergence" not in spacetime_svg(run, PEERS)
