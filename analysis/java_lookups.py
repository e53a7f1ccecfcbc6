"""Remembered py4j lookups for a classic (non-Connect) PySpark session.

PySpark reaches the JVM's classes by name through py4j: every ``F.col``, ``F.when`` or ``F.lit`` asks
the JVM what ``functions`` is (a class, after one failed ``Class.forName("functions")``, a scan of
the ~250 jars on Spark's class path), then what ``functions.col`` is (a static method), then calls
it: three round trips where one does. Each ``_to_seq`` asks again for ``PythonUtils`` (a miss in each
star import before it). The verifier's plans make tens of thousands of such calls.

:func:`remember` makes a JVM view keep each class it resolves, and each class keep its static
methods and inner classes: later lookups of the same name answer in Python. Nothing else is kept --
not packages, not field values -- and a class or a static method's identity never changes while the
JVM runs, so the answers stay right. A view of another gateway (a session started again) starts
empty."""

from __future__ import annotations

from py4j.java_gateway import JavaClass, JavaMember, JVMView


def _kept(owner, name: str, value):
    """``value``, the answer of ``owner``'s lookup of ``name``, kept on ``owner`` if it is a class
    (remembering in turn) or a static method."""
    if isinstance(value, JavaClass):
        value.__class__ = _RememberingClass
    elif not isinstance(value, JavaMember):
        return value
    owner.__dict__[name] = value
    return value


class _RememberingClass(JavaClass):
    """A py4j class that keeps its static methods and inner classes once looked up."""

    def __getattr__(self, name: str):
        return _kept(self, name, JavaClass.__getattr__(self, name))


class _RememberingView(JVMView):
    """A py4j JVM view that keeps the classes it resolves (packages and errors are asked again)."""

    def __getattr__(self, name: str):
        return _kept(self, name, JVMView.__getattr__(self, name))


def remember(jvm: JVMView) -> JVMView:
    """Make ``jvm`` (a session's ``sparkContext._jvm``) remember its class lookups; returns it."""
    if type(jvm) is JVMView:
        jvm.__class__ = _RememberingView
    return jvm
