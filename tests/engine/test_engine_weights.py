"""FlatWeights (one buffer for many tensors) and the direct-load plan's refusals; the direct load
itself against vLLM's reload_weights is tested on the real engine in tests/engine/test_engine.py."""

from __future__ import annotations

from typing import ClassVar

import torch

from rldata.engine.weights import FlatWeights, make_plan


def test_flat_weights_round_trip_every_dtype_and_shape():
    named = [
        ("a", torch.randn(3, 5)),
        ("b", torch.arange(7, dtype=torch.int64)),
        ("c", torch.randn(2, 3, dtype=torch.bfloat16)),
        ("d", torch.tensor(2.5)),
        ("e", torch.randn(4, 6).t()),  # not contiguous
    ]
    flat = FlatWeights.pack(named)
    assert flat.buffer.dtype.name == "uint8" and flat.buffer.ndim == 1
    assert all(off % 64 == 0 for off in flat.offsets)
    back = list(flat)
    assert [n for n, _ in back] == [n for n, _ in named]
    for (_, x), (_, y) in zip(named, back):
        assert y.dtype == x.dtype and y.shape == x.shape and torch.equal(x, y)


def test_flat_weights_survive_pickling_and_read_only_buffers():
    import pickle

    flat = FlatWeights.pack([("w", torch.randn(8, 8))])
    again = pickle.loads(pickle.dumps(flat))
    again.buffer.setflags(write=False)  # as Ray hands it over from the object store
    assert torch.equal(dict(again)["w"], dict(flat)["w"])


class _Lin(torch.nn.Module):
    def __init__(self, rows, cols):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(sum(rows), cols))


class _Model(torch.nn.Module):
    packed_modules_mapping: ClassVar[dict] = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}

    def __init__(self):
        super().__init__()
        self.qkv_proj = _Lin([4, 2, 2], 3)
        self.o_proj = _Lin([3], 4)


def test_the_plan_stacks_packed_shards_and_refuses_what_it_cannot_map():
    hf = {"q_proj.weight": (4, 3), "k_proj.weight": (2, 3), "v_proj.weight": (2, 3), "o_proj.weight": (3, 4)}
    plan = make_plan(_Model(), hf)
    assert not isinstance(plan, str), plan
    assert [(s.sources, s.rows) for s in plan.slots] == [
        (("q_proj.weight", "k_proj.weight", "v_proj.weight"), (4, 2, 2)),
        (("o_proj.weight",), (3,)),
    ]
    assert "no HF tensor" in make_plan(_Model(), {k: v for k, v in hf.items() if k != "k_proj.weight"})
    assert "no vLLM parameter" in make_plan(_Model(), {**hf, "extra.weight": (1,)})
    assert "vLLM shape" in make_plan(_Model(), {**hf, "o_proj.weight": (3, 5)})
    assert "tp 2" in make_plan(_Model(), hf, tp=2)
    assert "quantization fp8" in make_plan(_Model(), hf, quantized="fp8")
