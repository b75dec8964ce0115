"""Kubernetes operator for Maya planning jobs (``maya.operator``).

Placeholder: the operator arrives in a later change. It will run ``maya
emulate`` jobs described by the custom resources under ``crds/``.
"""

# This folder is installed as ``maya.operator``, but a Python started with the
# repository root on sys.path (``python -c`` or ``python -m`` run from the
# root) finds it first as the standard library's ``operator`` and would break
# ``enum``, ``json`` and most of the standard library.  In that case become
# the standard library module instead.
if __name__ == "operator":  # pragma: no cover - only when shadowing the stdlib
    import os as _os

    _stdlib_operator = _os.path.join(_os.path.dirname(_os.__file__), "operator.py")
    with open(_stdlib_operator, encoding="utf-8") as _f:
        exec(compile(_f.read(), _stdlib_operator, "exec"))
    del _os, _f, _stdlib_operator
