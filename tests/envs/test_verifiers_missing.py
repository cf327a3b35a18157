"""Without the optional verifiers package, ``--verifiers`` is one line saying what to install."""

from __future__ import annotations

import importlib.util

import pytest


@pytest.mark.skipif(importlib.util.find_spec("verifiers") is not None, reason="verifiers is installed")
def test_register_without_the_package_says_what_to_install(tmp_path, capsys):
    from rldata.cli import main

    code = main(["--store", str(tmp_path / "s"), "env", "register", "x", "--verifiers", "some_env"])
    err = capsys.readouterr().err
    assert code != 0 and "pip install 'verifiers==0.1.10'" in err and len(err.strip().splitlines()) == 1
