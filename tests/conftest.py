import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_collection_modifyitems(config, items):
    """On the compiled build, a test marked ``pure`` (it patches or walks the core's Python objects,
    which compiled modules do not let it) is skipped saying so; scripts/test runs it again with
    TOM_PURE=1."""
    import pytest

    from tom import build

    if not build.compiled():
        return
    skip = pytest.mark.skip(reason="patches or walks the core's Python objects: runs in the interpreted pass "
                                   "(TOM_PURE=1, scripts/test)")
    for item in items:
        if item.get_closest_marker("pure") is not None:
            item.add_marker(skip)
