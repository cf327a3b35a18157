"""Learnability cards of the bundled environments and of one reasoning-gym dataset at three
difficulty settings, measured with the bundled tiny model (``rldata env profile``).

Each card samples ``--tasks`` tasks ``--n`` times (``--max-tokens`` per turn, temperature 1, seed 0)
on a fresh store:

- ``single-turn`` and ``calculator``: the bundled arithmetic tasks (``rldata ingest --sample arith``);
- ``code-feedback``: the bundled code tasks (sample_data/code_tasks.jsonl);
- ``reasoning-gym.chain_sum`` at easy / medium / hard settings (``rldata ingest --gym``).

Run: ``python benchmarks/bench_env_cards.py --out benchmarks/bench_env_cards.json`` (prints one JSON
object: a card per environment; RESULTS.md reports it).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")

GYM = {
    "easy": {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
    "medium": {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 2},
    "hard": {"min_terms": 4, "max_terms": 5, "min_digits": 2, "max_digits": 3},
}
KEEP = (
    "env_id", "env_version", "tasks", "n", "histogram", "in_band", "in_band_lo", "in_band_hi", "verdict",
    "mean_turns", "tool_call_rate", "parse_fail_rate", "env_error_rate", "tokens_per_episode",
    "seconds_per_episode",
)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--out")
    a = ap.parse_args()

    from rldata import api, open_store
    from rldata.ingest.gym import ingest_gym
    from rldata.jobs.profile import profile_env

    kw = {"n": a.n, "tasks": a.tasks, "max_tokens": a.max_tokens}
    cards, t0 = {}, time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        arith = open_store(Path(tmp) / "arith")
        api.ingest(arith, sample="arith")
        for env in ("single-turn", "calculator"):
            cards[env] = profile_env(arith, env, **kw)
        code = open_store(Path(tmp) / "code")
        from importlib.resources import files

        api.ingest(code, path=str(files("rldata.sample_data").joinpath("code_tasks.jsonl")))
        cards["code-feedback"] = profile_env(code, "code-feedback", **kw)
        gym = open_store(Path(tmp) / "gym")
        for level, cfg in GYM.items():
            ingest_gym(gym, "chain_sum", n=a.tasks, config=cfg, seed=0)
            (ver,) = gym.sql(
                "SELECT DISTINCT env_version FROM tasks WHERE env_version NOT IN "
                "(SELECT DISTINCT env_version FROM env_profiles)"
            ).fetchall()[0]
            cards[f"reasoning-gym.chain_sum ({level})"] = profile_env(
                gym, f"reasoning-gym.chain_sum@{ver}", **kw
            )
    out = {
        "model": next(iter(cards.values()))["model"],
        "params": {"n": a.n, "tasks": a.tasks, "max_tokens": a.max_tokens, "temperature": 1.0, "seed": 0},
        "gym_settings": GYM,
        "cards": {k: {f: v[f] for f in KEEP} for k, v in cards.items()},
        "wall_s": round(time.monotonic() - t0, 1),
        "loadavg": os.getloadavg(),
    }
    text = json.dumps(out, indent=1, default=str)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
