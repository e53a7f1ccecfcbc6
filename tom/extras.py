"""What the optional extras of the ``tom`` package bring, and the one line a user reads when one is
missing.

The package itself (``pip install .`` or its wheel) runs peers and the library: trio, cryptography,
rich, prompt_toolkit and the HTTP parts. The verifier (``tom verify``, and the verification at the end
of a headless ``scripts/launch``) also needs PySpark, which is hundreds of MB: it comes with the extra
``verify`` (``pip install 'tom[verify]'``; the README's setup installs it). Without it, the verifier's
entry points say so in one line and exit 2; nothing imports PySpark before that check.
"""

from __future__ import annotations

import importlib.util

VERIFY_MISSING = ("tom verify needs PySpark, which this installation does not have: "
                  "pip install 'tom[verify]' (it brings PySpark and a Java runtime for a local Spark)")


def verifier_missing() -> str | None:
    """The one line to print when the verifier's extra is not installed; None when it is."""
    return None if importlib.util.find_spec("pyspark") is not None else VERIFY_MISSING
