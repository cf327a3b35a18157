"""Without the optional verifiers package, ``--verifiers`` is one line saying what to install."""

from __future__ import annotations

import sys


def test_register_without_the_package_says_what_to_install(tmp_path, capsys, monkeypatch):
    from rldata.cli import main

    # a None entry in sys.modules makes `import verifiers` raise ImportError, as on a machine
    # without the extra, whether or not this one has it installed
    for name in [m for m in sys.modules if m == "verifiers" or m.startswith("verifiers.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "verifiers", None)
    code = main(["--store", str(tmp_path / "s"), "env", "register", "x", "--verifiers", "some_env"])
    err = capsys.readouterr().err
    assert code != 0 and "pip install 'verifiers>=0.4,<0.5'" in err and len(err.strip().splitlines()) == 1
