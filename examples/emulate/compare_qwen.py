"""Check the torch_npu port of the Qwen-style blocks against the originals on the CPU.

    kb emulate -- python examples/emulate/compare_qwen.py            # text report
    kb emulate -- python examples/emulate/compare_qwen.py --json     # one JSON document

Each block is built with random weights, ported (the port wraps the same weights) and
run on the same input; ``kb.emulate.compare`` reports every submodule both name, and
the exit code is 1 when any block's port differs from its original.
"""

from __future__ import annotations

import json
import sys

import qwen_layer as orig
import qwen_port as port
import torch

from kb.emulate import compare

DTYPE = torch.bfloat16
BLOCKS = {
    "decoder": orig.DecoderLayer,
    "moe-decoder": orig.MoEDecoderLayer,
    "encoder": orig.EncoderLayer,
}


def check(name: str, make: type, cfg: orig.Config, seed: int = 0) -> object:
    """Build block ``name`` with random weights, port it, compare on one random input."""
    original = orig.random_weights(make(cfg), seed, DTYPE)
    ported = port.FusedDecoderLayer(original)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(2, 12, cfg.hidden, generator=gen).to(DTYPE).npu()
    cos, sin = orig.rope_tables(12, cfg, DTYPE)
    return compare(original, ported, (x, cos, sin))


def main(argv: list[str]) -> int:
    cfg = orig.Config()
    results = {name: check(name, make, cfg) for name, make in BLOCKS.items()}
    if "--json" in argv:
        print(json.dumps({name: r.as_dict() for name, r in results.items()}, indent=1))
    else:
        for name, r in results.items():
            print(f"{name}: {'ok' if r.passed else 'FAILED'} - {r.message()}")
    return 0 if all(r.passed for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
