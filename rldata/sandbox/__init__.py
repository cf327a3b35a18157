"""The code sandbox: run untrusted Python in a limited, isolated process (see :mod:`rldata.sandbox.process`).

Used by the code verifier (:mod:`rldata.verify.code`) and the code-feedback environment; it knows
nothing about verdicts or rewards.  ``_boot.py`` sets up the isolation inside the child,
``_harness.py`` is the code verifier's test runner copied into the sandbox.
"""

from rldata.sandbox.process import (
    BOOT_SCRIPT,
    HARNESS,
    UID_BASE,
    SandboxLimits,
    SandboxResult,
    probe_isolation,
    run_python,
)

__all__ = [
    "BOOT_SCRIPT",
    "HARNESS",
    "UID_BASE",
    "SandboxLimits",
    "SandboxResult",
    "probe_isolation",
    "run_python",
]
