"""What an encoder costs the app: a BERT-base-shaped model (12 layers of 12 heads of 64,
512 positions; random weights, the tests' small WordPiece tokenizer) built here and
served from its folder, as ATLAS_MODEL=<folder> would.

    .venv/bin/python -m bench.encoder            # n = 128, 256, 512 and the swap sweep
    .venv/bin/python -m bench.encoder --no-sweep

Per length: the analysis as the app makes it (one run of the whole text, then one run per
beginning of the text, since an encoder's tokens look ahead: Analysis.prefix), the whole
text's run alone, their ratio, and the memory the analysis holds with and without the
beginnings' weights. Then step 6's sweep (21 swaps) on 256 tokens, each measured as
pseudo-perplexity over 32 masked words in one batched forward. Medians of three runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForMaskedLM, BertConfig

from attn import folders, stats, swap
from harness import model_folders as mf
from ui.samples import sample_text


def build_base(folder: Path) -> Path:
    tok = mf._encoder_tokenizer("[CLS]", "[SEP]")
    config = BertConfig(vocab_size=len(tok), hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512, pad_token_id=0)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = AutoModelForMaskedLM.from_config(config, attn_implementation="eager")
    model.save_pretrained(str(folder))
    tok.save_pretrained(str(folder))
    return folder


def median_time(fn, runs: int = 3) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--no-sweep", action="store_true")
    args = ap.parse_args(argv)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    with tempfile.TemporaryDirectory() as tmp:
        m = folders.load_folder(build_base(Path(tmp) / "bert-base-shaped"), device="cpu")
        text = " ".join(sample_text(lang) for lang in ("en", "pt", "ja")) * 3
        print(f"{m.arch.family}: {m.n_layers} layers × {m.n_heads} heads of {m.head_dim}, "
              f"{m.arch.parameters / 1e6:.0f} M parameters, causal={m.causal}, budget {m.max_tokens} tokens")
        print()
        print(f"{'n':>5} {'analysis s':>11} {'whole run s':>12} {'ratio':>6} {'MB held':>8} {'MB w/o prefixes':>16}")
        for n in (128, 256, 512):
            m.analyze(text, max_tokens=n)  # warm
            a = m.analyze(text, max_tokens=n)
            full = median_time(lambda n=n: m.analyze(text, max_tokens=n))
            alone = median_time(lambda ids=a.ids: m._capture(ids))
            prefixes = sum(x.element_size() * x.numel() for qk in a.prefix_qk.values() for x in qk)
            print(f"{a.n:>5} {full:>11.3f} {alone:>12.3f} {full / alone:>6.2f} {a.nbytes / 2**20:>8.1f} "
                  f"{(a.nbytes - prefixes) / 2**20:>16.1f}   beginnings {stats.prefix_lengths(a.n)[:-1]}")
        if not args.no_sweep:
            swaps = swap.standard_sweep((0,), 8)
            t = time.perf_counter()
            res = swap.sweep(m, text, swaps, max_tokens=256)
            seconds = time.perf_counter() - t
            ok = [r for r in res if isinstance(r, swap.SwapResult)]
            print()
            print(f"step 6's sweep: {len(swaps)} swaps on {ok[0].n} tokens, {len(ok[0].predicted)} masked words each: "
                  f"{seconds:.1f} s ({seconds / len(swaps):.2f} s a swap); control pseudo-perplexity "
                  f"{ok[0].perplexity:.2f} vs {ok[0].base_perplexity:.2f} unmodified")
    return 0


if __name__ == "__main__":
    sys.exit(main())
