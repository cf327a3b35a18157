"""`rldata sample` end to end against bare vLLM generate loops, side by side, at two completion lengths.

    python benchmarks/bench_sample.py [--tasks 3500] [--long-tasks 500] [--repeats 3]
                                      [--lengths short,long] [--rss 1000,4000,16000]

Same prompts (the bundled arith tasks, then generated 2-digit 3-operand ones if more are asked for),
same sampling (n=16, temperature 1, per-task seeds, log-probs on), same model weights:

- ``short``: the bundled model as shipped, at most 8 tokens (its answers end on eos after a few);
- ``long``: the same weights with an eos id the model cannot emit (a copy of the model directory
  made under ``benchmarks/_work``), at most 64 tokens, so every completion is 64 tokens long.

Contenders, each in a fresh child process (imports, engine load and all), in a rotating order so
that no side always runs first on a cold or warm cache:

- ``bare``: one in-process ``rldata.engine.core.Engine`` (vLLM ``LLM.generate`` with
  ``SamplingParams(n=16)``), batches of 128 prompts, generation only, OpenMP left as vLLM sets it
  (what a user's script gets);
- ``bare1`` / ``bare2``: the same loop with ``OMP_NUM_THREADS=1`` / ``2`` (on this machine the
  faster of the two is the bare loop at its best);
- ``rldata``: ``run_sample`` into a fresh store: Ray start, engine actor start, generation,
  verification, Delta commits of trajectories and verifications, the ledger and the run record;
- ``rldata1``: the same job with one engine actor (``engines=1``, the CPU default before
  ``default_engines`` started one per core);
- ``rldata_before`` (with ``--before DIR``): the same job with another checkout's code (a worktree of
  an earlier commit with its own ``.venv``), for before/after rows in one run.

Reported per contender: samples/s end to end (from process start: imports, Ray, engine load,
everything) and of the generate loop alone; for rldata also end to end without the Ray start (a
cluster's Ray is already up) and the job's own time split (``SampleSummary.time_*``, the engines'
busy share).  Medians over ``--repeats`` runs, with min..max.  ``--rss``: the driver's peak RSS for
growing task counts (it must stream).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
T_PROCESS = time.perf_counter()  # a child's clock starts before its heavy imports

HERE = Path(__file__).resolve().parent
WORK = HERE / "_work" / "bench_sample"
LENGTHS = {"short": 8, "long": 64}  # max tokens per completion
BATCH = 128
CONTENDERS = ("bare", "bare1", "bare2", "rldata", "rldata1", "rldata_before")


def _tasks(n: int) -> list[dict]:
    from rldata.sample_data.arith import generate, load_bundled

    rows = (load_bundled("train") + load_bundled("heldout"))[:n]
    if len(rows) < n:  # more than the bundle: 2-digit, 3-operand expressions (millions of distinct ones)
        rows += generate(
            n - len(rows),
            seed=123,
            digits=2,
            n_operands=3,
            operators="+-*",
            exclude={r["prompt"] for r in rows},
        )
    return [
        {
            "task_id": f"b{i:07d}",
            "source": "arith",
            "domain": "math",
            "prompt": r["prompt"],
            "answer": r["answer"],
        }
        for i, r in enumerate(rows)
    ]


def long_model() -> Path:
    """The bundled weights with an eos id beyond the vocabulary: every completion runs to the cap."""
    path = WORK / "tiny-arith-noeos"
    if (path / "config.json").exists():
        return path  # made once by the parent: no child pays for importing transformers here
    from transformers import AutoTokenizer

    from rldata.engine.core import default_model_path

    src = default_model_path()
    tmp = WORK / "tiny-arith-noeos.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp)
    cfg = json.loads((src / "config.json").read_text())
    vocab = cfg["vocab_size"]
    tok = AutoTokenizer.from_pretrained(src)
    tok.add_special_tokens({"eos_token": "<eos-unreachable>"})  # id == vocab: never sampled
    assert tok.eos_token_id == vocab, (tok.eos_token_id, vocab)
    tok.save_pretrained(tmp)
    for name in ("config.json", "generation_config.json"):
        c = json.loads((tmp / name).read_text())
        c["eos_token_id"] = vocab
        (tmp / name).write_text(json.dumps(c, indent=2))
    tmp.rename(path)
    return path


def _spec(length: str):
    from rldata.configs.sampling import SamplingSpec

    return SamplingSpec(n=16, temperature=1.0, max_tokens=LENGTHS[length], seed=0)


def _model(length: str) -> str | None:
    return None if length == "short" else str(long_model())


def bare(length: str, n_tasks: int) -> dict:
    from rldata.engine.core import Engine, model_context, model_identity

    tasks, spec, model = _tasks(n_tasks), _spec(length), _model(length)
    t_load = time.perf_counter()
    eng = Engine(model, seed=0, max_model_len=model_context(model_identity(model).path))
    t0 = time.perf_counter()
    done = tokens = 0
    for i in range(0, len(tasks), BATCH):
        chunk = tasks[i : i + BATCH]
        out = eng.generate(
            [t["prompt"] for t in chunk],
            spec,
            seeds=[spec.request_seed(t["task_id"]) for t in chunk],
            logprobs=True,
        )
        done += sum(len(g) for g in out)
        tokens += sum(s.completion_tokens for g in out for s in g)
    t1 = time.perf_counter()
    eng.close()
    return {
        "samples": done,
        "tokens": tokens,
        "e2e_s": t1 - T_PROCESS,
        "loop_s": t1 - t0,
        "load_s": t0 - t_load,
    }


class CpuMeter:
    """CPU seconds of this process and its descendants (Ray's raylet, workers, actors, the verifier
    child), by kind, sampled every ``every_s`` (a process's last interval before it exits is lost)."""

    def __init__(self, every_s: float = 1.0):
        import threading

        import psutil

        self._psutil, self.every_s, self.seen = psutil, every_s, {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def kind(cmdline: str, me: bool) -> str:
        if me:
            return "driver"
        for key, name in (  # a Ray worker's title says what it runs now (ray::IDLE between tasks)
            ("EngineActor", "engine"),
            ("rldata.verify.isolate", "verifier child"),
            ("_verify_chunk", "ray verify tasks"),
            ("ray::", "other ray workers"),
            ("default_worker", "other ray workers"),
            ("gcs_server", "ray system"),
            ("raylet", "ray system"),
        ):
            if key in cmdline:
                return name
        return "other"

    _GENERIC = ("other ray workers", "other")

    def _sample(self) -> None:
        me = self._psutil.Process()
        for p in [me, *me.children(recursive=True)]:
            try:
                t = p.cpu_times()
                key = (p.pid, p.create_time())
                kind = self.kind(" ".join(p.cmdline()), p.pid == me.pid)
                entry = self.seen.setdefault(key, [kind, 0.0])
                if entry[0] in self._GENERIC:  # a worker is counted as what it was last seen doing
                    entry[0] = kind
                entry[1] = t.user + t.system
            except self._psutil.Error:
                pass

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self._sample()

    def __enter__(self):
        self._sample()
        self.base = {k: v[1] for k, v in self.seen.items()}
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def by_kind(self) -> dict:
        out: dict = {}
        for key, (kind, cpu) in self.seen.items():
            out[kind] = out.get(kind, 0.0) + cpu - self.base.get(key, 0.0)
        return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


def rldata_job(length: str, n_tasks: int, engines: int | None = None) -> dict:
    import ray

    from rldata import open_store
    from rldata.configs.sampling import SampleConfig
    from rldata.engine.actors import ensure_ray
    from rldata.jobs.sample import run_sample

    tasks, spec, model = _tasks(n_tasks), _spec(length), _model(length)
    t_setup = time.perf_counter()  # the store and its tasks are the job's input, not its work
    root = tempfile.mkdtemp(prefix="bench-sample-")
    store = open_store(root)
    store.append("tasks", tasks)
    t_ray = time.perf_counter()
    setup = t_ray - t_setup
    ensure_ray(None)
    t0 = time.perf_counter()
    with CpuMeter() as cpu:
        s = run_sample(store, SampleConfig(sampling=spec, model=model, batch_tasks=BATCH, engines=engines))
    t1 = time.perf_counter()
    tokens = store.sql("SELECT sum(completion_tokens) FROM trajectories").fetchall()[0][0]
    ray.shutdown()
    shutil.rmtree(root, ignore_errors=True)
    d = s.to_dict()
    return {
        "samples": s.samples,
        "tokens": int(tokens or 0),
        "e2e_s": t1 - T_PROCESS - setup,
        "e2e_no_ray_s": t1 - T_PROCESS - setup - (t0 - t_ray),
        "setup_s": setup,
        "ray_start_s": t0 - t_ray,
        "job_s": t1 - t0,
        "split": {k: v for k, v in d.items() if k.startswith("time_") or k == "engine_busy_frac"},
        "cpu_s": cpu.by_kind(),
    }


def _child(which: str, length: str, n_tasks: int) -> dict:
    if which.startswith("bare"):
        out = bare(length, n_tasks)
    else:
        out = rldata_job(length, n_tasks, engines=1 if which == "rldata1" else None)
    out["rldata_source"] = __import__("rldata").__file__
    return {"contender": which, "length": length, **out}


def _run_child(which: str, length: str, n_tasks: int, before: str = "") -> dict:
    """One contender in a fresh process.  ``rldata_before`` is the rldata job of another checkout
    (``--before DIR``: a worktree of an earlier commit with its own .venv), for before/after rows."""
    env = dict(os.environ)
    env.pop("OMP_NUM_THREADS", None)
    if which in ("bare1", "bare2"):
        env["OMP_NUM_THREADS"] = which[-1]
    python, cwd = sys.executable, None
    if which == "rldata_before":
        python, cwd = str(Path(before) / ".venv" / "bin" / "python"), before
    load = os.getloadavg()[0]
    cmd = [python, __file__, "--child", which, "--length", length, "--tasks", str(n_tasks)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    if p.returncode != 0:
        raise SystemExit(f"{which} {length} failed:\n{p.stderr[-3000:]}")
    row = json.loads(p.stdout.strip().splitlines()[-1])
    row["load_before"], row["load_after"] = round(load, 2), round(os.getloadavg()[0], 2)
    return row


def _summarise(rows: list[dict]) -> dict:
    def med(xs, nd=1):
        return {
            "median": round(statistics.median(xs), nd),
            "min": round(min(xs), nd),
            "max": round(max(xs), nd),
        }

    out = {}
    for length in sorted({r["length"] for r in rows}):
        here = [r for r in rows if r["length"] == length]
        by = {c: [r for r in here if r["contender"] == c] for c in CONTENDERS}
        rate = {
            c: [r["samples"] / r["e2e_s"] for r in rs] for c, rs in by.items() if rs
        }  # samples/s end to end
        s = {c: {"e2e_samples_per_s": med(v)} for c, v in rate.items()}
        for c, rs in by.items():
            if c.startswith("bare") and rs:
                s[c]["loop_samples_per_s"] = med([r["samples"] / r["loop_s"] for r in rs])
        for job in ("rldata", "rldata1", "rldata_before"):
            rs = by[job]
            if not rs:
                continue
            s[job]["e2e_no_ray_samples_per_s"] = med([r["samples"] / r["e2e_no_ray_s"] for r in rs])
            s[job]["split_median"] = {
                k: round(statistics.median(r["split"][k] or 0 for r in rs), 3) for k in rs[0]["split"]
            }
            kinds = sorted({k for r in rs for k in r["cpu_s"]})
            s[job]["cpu_s_median"] = {
                k: round(statistics.median(r["cpu_s"].get(k, 0.0) for r in rs), 2) for k in kinds
            }
            # ratios per repeat, the job against each bare contender of the same repeat
            for c in ("bare", "bare1", "bare2"):
                pairs = list(zip(rs, by[c]))
                if pairs:
                    s[job][f"ratio_e2e_vs_{c}"] = med([b["e2e_s"] / r["e2e_s"] for r, b in pairs], 3)
                    s[job][f"ratio_e2e_no_ray_vs_{c}"] = med(
                        [b["e2e_s"] / r["e2e_no_ray_s"] for r, b in pairs], 3
                    )
        s["samples"] = here[0]["samples"]
        s["mean_completion_tokens"] = round(here[0]["tokens"] / max(1, here[0]["samples"]), 2)
        out[length] = s
    return out


def rss_child(n_tasks: int) -> None:
    """Run a job of n_tasks in this process and print the driver's peak RSS (MiB)."""
    rldata_job("short", n_tasks)
    print(json.dumps({"tasks": n_tasks, "samples": n_tasks * 16, "peak_rss_mib": round(_vm_hwm_mib(), 1)}))


def _vm_hwm_mib() -> float:
    """This process's peak RSS.  Not ``getrusage``: its ``ru_maxrss`` survives exec, so a child
    started from this benchmark would report the parent's peak (the baseline's loaded engine)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=3500, help="tasks for the short completions")
    ap.add_argument("--long-tasks", type=int, default=500, help="tasks for the 64-token completions")
    ap.add_argument("--lengths", default="short,long")
    ap.add_argument("--contenders", default=",".join(CONTENDERS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--before", default="", help="a checkout (with .venv) whose rldata job runs as rldata_before"
    )
    ap.add_argument("--out", default=str(HERE / "bench_sample.json"))
    ap.add_argument("--rss", default="", help="comma-separated task counts for the driver RSS runs")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--length", default="short", help=argparse.SUPPRESS)
    ap.add_argument("--rss-child", type=int, default=0, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rss_child:
        rss_child(a.rss_child)
        return
    if a.child:
        print(json.dumps(_child(a.child, a.length, a.tasks)), flush=True)
        return
    lengths = [x for x in a.lengths.split(",") if x]
    contenders = [x for x in a.contenders.split(",") if x and (x != "rldata_before" or a.before)]
    if "long" in lengths:
        long_model()  # made once, outside any timed child
    rows, started = [], time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    for rep in range(a.repeats):
        for length in lengths:
            n = a.tasks if length == "short" else a.long_tasks
            order = contenders[rep % len(contenders) :] + contenders[: rep % len(contenders)]
            for c in order:
                row = _run_child(c, length, n, a.before)
                row["repeat"] = rep
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
    result = {
        "started": started,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": f"{os.cpu_count()} CPUs",
        "summary": _summarise(rows),
        "runs": rows,
    }
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result["summary"], indent=1))
    for n in [int(x) for x in a.rss.split(",") if x]:
        out = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(n)], capture_output=True, text=True, check=False
        )
        print(out.stdout.strip().splitlines()[-1] if out.returncode == 0 else out.stderr[-2000:])


if __name__ == "__main__":
    main()
