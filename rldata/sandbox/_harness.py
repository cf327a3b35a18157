"""Test harness that runs INSIDE the sandbox as ``main.py`` (standard library only).

It loads ``solution.py``, runs the inputs in ``cases.json`` and writes one JSON line per case to
a private copy of fd 1; fd 1 itself is pointed at stderr, so nothing the solution prints can be
mistaken for a result.  Expected outputs never enter the sandbox: the host compares.
"""

import io
import json
import os
import signal
import sys
import time

_RES = os.dup(1)
os.dup2(2, 1)
_MAX_OUT = 100_000  # characters of one result; more is reported as too big


class _CaseTimeout(BaseException):  # BaseException: `except Exception` in the solution cannot swallow it
    pass


def _alarm(signum, frame):
    raise _CaseTimeout()


def _emit(obj):
    line = json.dumps(obj)
    if len(line) > _MAX_OUT:
        line = json.dumps({"i": obj.get("i"), "error": "output too big"})
    os.write(_RES, (line + "\n").encode())


def _jsonable(value):
    try:
        json.dumps(value, allow_nan=True)
        return value
    except (TypeError, ValueError, RecursionError):
        return {"__repr__": repr(value)[:1000]}


def _err(e):
    return f"{type(e).__name__}: {str(e)[:300]}"


def _disarm():
    while True:  # a late alarm may land in here: retry until the timer is off
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
            return
        except _CaseTimeout:
            continue


def _timed(fn, limit):
    # re-fires every 0.1 s in case the solution swallows the first one with a bare except
    signal.setitimer(signal.ITIMER_REAL, limit, 0.1)
    try:
        return fn()
    finally:
        _disarm()


def _function_cases(spec, src):
    g = {"__name__": "solution", "__builtins__": __builtins__}
    sys.stdout = io.StringIO()  # prints at import time are not results
    try:
        _timed(lambda: exec(compile(src, "solution.py", "exec"), g), spec["time_limit_s"])  # noqa: S102
    except _CaseTimeout:
        return _emit({"load_error": "timeout while loading the solution"})
    except BaseException as e:  # noqa: BLE001
        return _emit({"load_error": _err(e)})
    fn = g.get(spec["entry_point"])
    if not callable(fn):
        return _emit({"load_error": f"no function named {spec['entry_point']!r}"})
    for i, case in enumerate(spec["cases"]):
        args = case["input"]
        sys.stdout = io.StringIO()
        t0 = time.perf_counter()
        try:
            if isinstance(args, dict):
                out = _timed(lambda a=args: fn(**a), spec["time_limit_s"])
            else:
                out = _timed(lambda a=args: fn(*a), spec["time_limit_s"])
            rec = {"i": i, "out": _jsonable(out)}
        except _CaseTimeout:
            _disarm()
            rec = {"i": i, "error": "timeout"}
        except BaseException as e:  # noqa: BLE001
            rec = {"i": i, "error": _err(e)}
        rec["t"] = round(time.perf_counter() - t0, 4)
        _emit(rec)


def _stdio_cases(spec, src):
    try:
        code = compile(src, "solution.py", "exec")
    except BaseException as e:  # noqa: BLE001
        return _emit({"load_error": _err(e)})
    for i, case in enumerate(spec["cases"]):
        with open("case.in", "w", encoding="utf-8") as f:
            f.write(case["input"])
        fd = os.open("case.in", os.O_RDONLY)
        if fd != 0:  # fd 0 is free when the solution closed it (open(0) does): os.open reused it
            os.dup2(fd, 0)  # so that open(0) and sys.stdin.buffer both read the case
            os.close(fd)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, closefd=False), encoding="utf-8")
        buf = io.BytesIO()
        sys.stdout = io.TextIOWrapper(buf, encoding="utf-8", write_through=True)
        t0 = time.perf_counter()
        rec = {"i": i}
        try:
            env = {"__name__": "__main__", "__builtins__": __builtins__}
            _timed(lambda env=env: exec(code, env), spec["time_limit_s"])  # noqa: S102
        except SystemExit as e:
            if e.code not in (None, 0):
                rec["error"] = f"exit: {e.code}"
        except _CaseTimeout:
            _disarm()
            rec["error"] = "timeout"
        except BaseException as e:  # noqa: BLE001
            rec["error"] = _err(e)
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001, S110 - the solution may have broken stdout
            pass
        rec["out"] = buf.getvalue().decode("utf-8", "replace")
        rec["t"] = round(time.perf_counter() - t0, 4)
        _emit(rec)


def main():
    signal.signal(signal.SIGALRM, _alarm)
    with open("cases.json", encoding="utf-8") as f:
        spec = json.load(f)
    with open("solution.py", encoding="utf-8") as f:
        src = f.read()
    sys.setrecursionlimit(10_000)
    if spec["style"] == "function":
        _function_cases(spec, src)
    else:
        _stdio_cases(spec, src)
    _emit({"done": True})


main()
