"""Spark verification of TOM output files (schema v1, see docs/output-format.md).

Layout: :mod:`analysis.schema` reads and parses peers' JSON Lines files, :mod:`analysis.checks` holds
the pure ``DataFrame -> DataFrame`` checks, :mod:`analysis.report` renders the terminal summary, the
JSON report and the HTML picture, :mod:`analysis.session` builds the SparkSession and
:mod:`analysis.verify` is the job entry point (``spark-submit analysis/verify.py`` or ``main(argv)``).
"""
