"""The numbers the room keeps of a text (attn.room_numbers), each against an independent
computation on the tiny model: rows sorted and summed one by one in plain Python or
NumPy, attention written out from q, k, v with explicit masks — never the engine's own
functions — and the room's verdicts counted by hand."""

import math

import numpy as np
import pytest

from attn import loading
from attn import room_numbers

TEXT = "Every student's text is one point of the class's experiment, here measured twice. " * 6


@pytest.fixture(scope="module")
def measured():
    a = loading.tiny(device="cpu").analyze(TEXT, max_tokens=room_numbers.ROOM_TOKENS)
    return a, room_numbers.text_numbers(a)


def close(x, y, rel=1e-3):
    return abs(x - y) <= rel * max(abs(y), 1e-12) + 1e-9


def k_of_row(row: np.ndarray, p: float) -> int:
    """The fewest cells, largest first, whose weights reach p of the row."""
    total, acc = float(row.sum()), 0.0
    for k, w in enumerate(sorted(row.tolist(), reverse=True), start=1):
        acc += w
        if acc >= p * total - 1e-6:
            return k
    return len(row)


def row_cells(i: int, window) -> int:
    return i + 1 if window is None else min(i + 1, window)


def test_the_useful_share_on_every_prefix_of_every_layer_against_rows_sorted_one_by_one(measured):
    a, nums = measured
    weights = a.weights().dense().float().numpy()
    for layer in range(a.n_layers):
        window = a.layers[layer].window
        for point in nums.useful[layer]:
            m, k_bar, share, uniform = point.n, point.k, point.share, point.uniform_share
            ks = [np.mean([k_of_row(weights[layer, h, i, : i + 1], room_numbers.ROOM_P) for i in range(m)])
                  for h in range(a.n_heads)]
            cells = sum(row_cells(i, window) for i in range(m))
            assert close(k_bar, float(np.mean(ks))), (layer, m)
            assert close(share, m * float(np.mean(ks)) / cells), (layer, m)
            even = sum(max(1, math.ceil(room_numbers.ROOM_P * row_cells(i, window) - 1e-9)) for i in range(m))
            assert close(uniform, even / cells), (layer, m)
        assert nums.useful[layer][-1].n == a.n


def kept(weights: np.ndarray, allowed) -> float:
    """Mean over layers, heads and rows of the weight on the allowed cells."""
    n = weights.shape[-1]
    mask = np.array([[allowed(i, j) for j in range(n)] for i in range(n)], dtype=np.float64)
    return float((weights * mask).sum(-1).mean())


def test_what_a_window_keeps_with_and_without_hubs_and_the_sink_against_written_out_masks(measured):
    a, nums = measured
    weights = a.weights().dense().double().numpy()
    for w in room_numbers.ROOM_WINDOWS:
        assert close(nums.kept[w].mean, kept(weights, lambda i, j, w=w: j <= i and i - j < w))
        for layer in (0, a.n_layers - 1):
            assert close(nums.kept[w].layers[layer],
                         kept(weights[layer:layer + 1], lambda i, j, w=w: j <= i and i - j < w))
    hubs = set(nums.hubs)
    assert 0 in hubs and len(hubs) <= 1 + room_numbers.ANCHOR_HUBS
    hw = nums.hub_window
    assert close(nums.kept_window, kept(weights, lambda i, j: j <= i and i - j < hw))
    assert close(nums.kept_window_hubs,
                 kept(weights, lambda i, j: j <= i and (i - j < hw or i in hubs or j in hubs)))
    for layer in range(a.n_layers):
        assert close(nums.sink[layer], float(weights[layer, :, 1:, 0].mean()))
    assert close(nums.sink_mean, float(weights[:, :, 1:, 0].mean()))


def test_what_each_rows_top_cells_keep_at_the_windows_cells_against_rows_sorted_one_by_one(measured):
    a, nums = measured
    weights = a.weights().dense().double().numpy()
    L, H, n, _ = weights.shape
    for w in room_numbers.ROOM_WINDOWS:
        keep = w  # a causal model: the window's cells a row
        per_layer = []
        for layer in range(L):
            rows = [sum(sorted(weights[layer, h, i].tolist(), reverse=True)[:keep]) for h in range(H) for i in range(n)]
            per_layer.append(sum(rows) / len(rows))
        assert close(nums.kept_top[w].mean, sum(per_layer) / L)
        assert close(nums.kept_top[w].layers[-1], per_layer[-1])
        assert nums.kept_top[w].mean >= nums.kept[w].mean - 1e-4  # no choice of w cells keeps more


def attend(q, k, v, scale, allowed) -> np.ndarray:
    """Softmax attention written out, row by row, over the allowed keys."""
    n = q.shape[0]
    out = np.zeros_like(v)
    for i in range(n):
        js = [j for j in range(n) if allowed(i, j)]
        s = np.array([q[i] @ k[j] for j in js]) * scale
        p = np.exp(s - s.max())
        p /= p.sum()
        out[i] = p @ v[js]
    return out


def test_each_shortcuts_error_against_attention_written_out(measured):
    a, nums = measured
    layer = nums.error_layer
    assert layer == min(room_numbers.ERROR_LAYER, a.n_layers - 1)
    q, k, v = (x[0].double().numpy() for x in a.qkv(layer))
    own, w, hubs = a.layers[layer].window, nums.error_window, set(nums.hubs)
    scale = a.layers[layer].scale

    def in_own(i, j):
        return j <= i and (own is None or i - j < own)

    def rel(out, exact):
        return float(np.linalg.norm(out - exact) / np.linalg.norm(exact))

    got = {"window": [], "window_hubs": [], "uniform": []}
    for h in range(a.n_heads):
        exact = attend(q[h], k[h], v[h], scale, in_own)
        got["window"].append(rel(attend(q[h], k[h], v[h], scale, lambda i, j: j <= i and i - j < w), exact))
        got["window_hubs"].append(rel(attend(q[h], k[h], v[h], scale,
                                             lambda i, j: j <= i and (i - j < w or i in hubs or j in hubs)), exact))
        n = q.shape[1]
        even = np.array([[1.0 if in_own(i, j) else 0.0 for j in range(n)] for i in range(n)])
        got["uniform"].append(rel((even / even.sum(-1, keepdims=True)) @ v[h], exact))
    for name, errs in got.items():
        assert close(nums.errors[name], float(np.mean(errs)), rel=2e-3), name
    assert nums.errors["own"] < 1e-4  # the fused kernel: the same answer up to rounding


def test_the_rooms_verdicts_counted_by_hand():
    """Three texts made up (300, 100 and 10 tokens): the useful share falls in two layers
    of three in the first, in one of three in the second; the third is too short to have
    two prefixes."""
    def text(shares, sink, n, kept, errors):
        return made(n=n, layers=len(shares), sink_mean=sink, errors=errors,
                    useful=tuple((U(16, 2.0, a, 0.9), U(n, 2.0, b, 0.9)) if b is not None else (U(n, 2.0, a, 0.9),)
                                 for a, b in shares),
                    kept={w: room_numbers.KeptShare(kept[i], ()) for i, w in enumerate(room_numbers.ROOM_WINDOWS)})

    texts = [("en", text([(0.5, 0.2), (0.4, 0.3), (0.2, 0.3)], 0.3, 300, [0.1, 0.4, 0.6, 0.9], {"window": 0.5})),
             ("pt", text([(0.5, 0.6), (0.4, 0.1), (0.2, 0.3)], 0.01, 100, [0.1, 0.2, 0.3, 0.4], {"window": 0.3})),
             ("ja", text([(0.5, None)] * 3, 0.25, 10, [0.2, 0.6, 0.7, 0.8], {"window": 0.1}))]
    v = room_numbers.verdicts(texts)
    assert v.shrinks == room_numbers.Shrinks(held=1, of=2, langs={"en": [1, 1], "pt": [0, 1]})
    # a window counts only the texts longer than it: 256 → the first alone, 64 → the first two
    assert v.window[256] == room_numbers.WindowVerdict(median=0.9, most=1, of=1, shorter=2)
    assert v.window[64].median == pytest.approx(0.45)  # (0.6 + 0.3) / 2
    assert (v.window[64].most, v.window[64].of, v.window[64].shorter) == (1, 2, 1)
    assert v.window[4] == room_numbers.WindowVerdict(median=0.1, most=0, of=3, shorter=0)
    even_100 = sum(1 / (i + 1) for i in range(1, 100)) / 99  # ≈ 0.0524
    assert room_numbers.uniform_sink(100) == pytest.approx(even_100)
    even_10 = (1 / 2 + 1 / 3 + 1 / 4 + 1 / 5 + 1 / 6 + 1 / 7 + 1 / 8 + 1 / 9 + 1 / 10) / 9  # ≈ 0.2143
    assert room_numbers.uniform_sink(10) == pytest.approx(even_10)
    assert v.sink == room_numbers.SinkVerdict(median=0.25, above=2, of=3)  # 0.3 > 0.018 (n = 300), 0.25 > 0.214;
    assert v.errors == {"window": 0.3}  # 0.01 < 0.052


def test_an_encoders_room_numbers_read_both_ways_and_each_prefix_is_its_own_run(tmp_path):
    """On an encoder (a tiny BERT folder) each prefix's k is counted on transformers' own
    eager attention over those first tokens closed on [SEP], the window keeps both sides
    and the first token's even share is 1/n."""
    import torch
    from transformers import AutoModelForMaskedLM

    from attn import folders
    from harness import model_folders as mf

    folder = mf.build("bert", tmp_path / "bert")
    m = folders.load_folder(folder, device="cpu")
    a = m.analyze(TEXT, max_tokens=room_numbers.ROOM_TOKENS)
    nums = room_numbers.text_numbers(a)
    assert nums.causal is False and a.n > 32
    net = AutoModelForMaskedLM.from_pretrained(str(folder), attn_implementation="eager").eval()
    for layer in range(a.n_layers):
        for point in nums.useful[layer][:2]:  # the first two beginnings: runs of their own
            length, k_bar, share, uniform = point.n, point.k, point.share, point.uniform_share
            with torch.no_grad():
                out = net.base_model(input_ids=torch.tensor([a.ids[:length - 1] + a.ids[-1:]]),
                                     output_attentions=True)
            w = out.attentions[layer][0].double().numpy()
            ks = [np.mean([k_of_row(w[h, i], room_numbers.ROOM_P) for i in range(length)]) for h in range(a.n_heads)]
            assert close(k_bar, float(np.mean(ks))), (layer, length)
            assert close(share, length * float(np.mean(ks)) / length ** 2), (layer, length)
            assert close(uniform, math.ceil(room_numbers.ROOM_P * length - 1e-9) / length), (layer, length)
    weights = a.weights().dense().double().numpy()
    assert close(nums.kept[4].mean, kept(weights, lambda i, j: abs(i - j) < 4))
    assert room_numbers.uniform_sink(a.n, causal=False) == pytest.approx(1 / a.n)
    sink = float(weights[:, :, 1:, 0].mean())  # the first token's share, from the weights themselves
    assert room_numbers.verdicts([("en", nums)]).sink.above == (1 if sink > 1 / a.n else 0)


def made(**given) -> room_numbers.RoomNumbers:
    """A text's room numbers made up: the fields a test names, the rest plain."""
    plain = dict(n=10, causal=True, layers=1, layer_types=("full",), window=0, p=room_numbers.ROOM_P, useful=((),),
                 kept={w: room_numbers.KeptShare(0.5, ()) for w in room_numbers.ROOM_WINDOWS}, sink=(0.1,),
                 sink_mean=0.1, hub_window=8, hubs=(0,), kept_window=0.5, kept_window_hubs=0.6, error_layer=0,
                 error_window=16, errors={})
    return room_numbers.RoomNumbers(**{**plain, **given})


U = room_numbers.UsefulPoint


def test_room_numbers_kept_before_they_had_a_version_are_upgraded_when_read_and_a_newer_layout_refused():
    """A row the store kept before the numbers had a version (layout 1: no version, and a
    decoder's room before encoders: no ``causal``) reads as today's record, every number as
    it was; today's record goes through the store's JSON unchanged."""
    import json

    old = {"n": 40, "layers": 1, "layer_types": ["sliding"], "window": 512, "p": 0.9,
           "useful": [[[16, 2.5, 0.3, 0.6], [40, 3.0, 0.2, 0.7]]], "kept": {"4": {"mean": 0.4, "layers": [0.4]},
                                                                          "16": {"mean": 0.7, "layers": [0.7]}},
           "sink": [0.2], "sink_mean": 0.2, "hub_window": 8, "hubs": [0, 3], "kept_window": 0.5,
           "kept_window_hubs": 0.8, "error_layer": 0, "error_window": 16, "errors": {"own": 1e-7, "window": 0.2}}
    got = room_numbers.RoomNumbers.from_json(old)
    assert got.version == room_numbers.VERSION and got.causal is True
    assert got.useful == ((U(16, 2.5, 0.3, 0.6), U(40, 3.0, 0.2, 0.7)),) and got.kept[16].mean == 0.7
    assert got.hubs == (0, 3) and got.errors == {"own": 1e-7, "window": 0.2} and got.n == 40
    again = room_numbers.RoomNumbers.from_json(json.loads(json.dumps(got.to_json())))
    assert again == got
    with pytest.raises(ValueError, match="newer"):
        room_numbers.RoomNumbers.from_json({**old, "version": room_numbers.VERSION + 1})
    assert got.kept_top is None  # layouts before 4 did not measure top-k: not made up
    three = room_numbers.RoomNumbers.from_json({**old, "version": 3, "causal": False, "model": "gemma"})
    assert three.kept_top is None and three.model == "gemma" and three.causal is False
    four = made(kept_top={4: room_numbers.KeptShare(0.9, (0.9,))})
    assert room_numbers.RoomNumbers.from_json(json.loads(json.dumps(four.to_json()))) == four
    assert room_numbers.RoomNumbers.from_json({**four.to_json(), "version": 4}).steps == {}  # layout 4: none
    five = made(steps={"text-length": {"version": 2, "record": {"tokens": 7}}})
    assert room_numbers.RoomNumbers.from_json(json.loads(json.dumps(five.to_json()))) == five


def test_a_steps_own_room_record_is_read_in_its_own_layouts_and_none_where_it_was_not_measured():
    """A step's own record of a room text (ui.step_parts.RoomMeasure) is read by the step's
    own reader with the layout it was kept in; a text measured before the step declared it,
    or in a layout newer than the step's, has none (never a made-up number)."""
    from ui.step_parts import RoomMeasure, Step

    def read(raw, version):  # layout 1 kept a count of characters; 2 keeps tokens
        return raw["tokens"] if version == 2 else raw["chars"] // 4

    step = Step("text-length", order=25, icon="", page="", room_measure=RoomMeasure(
        2, measure=lambda a: a.n, to_json=lambda n: {"tokens": n}, from_json=read))
    assert step.room_record(made(steps={"text-length": {"version": 2, "record": {"tokens": 7}}})) == 7
    assert step.room_record(made(steps={"text-length": {"version": 1, "record": {"chars": 40}}})) == 10
    assert step.room_record(made(steps={"text-length": {"version": 3, "record": {"tokens": 7}}})) is None
    assert step.room_record(made()) is None and step.room_record(made(steps={"other": {"version": 1}})) is None
    assert Step("x", order=1, icon="", page="").room_record(made(steps={"x": {"version": 1, "record": {}}})) is None
    assert step.room_record(made(steps={"text-length": {"version": 2, "record": {"chars": 40}}})) is None  # unreadable
    kept = room_numbers.RoomNumbers.from_json({**made().to_json(), "steps": {
        "text-length": {"version": 2, "record": {"tokens": 7}}, "broken": {"record": {}}, "odd": [1, 2]}})
    assert kept.steps == {"text-length": {"version": 2, "record": {"tokens": 7}}}  # the malformed ones left out


def test_a_step_whose_own_room_measure_fails_is_left_out_and_the_others_keep_theirs(monkeypatch, caplog):
    """The room's worker runs each step's own measure on a text; one that raises, or gives
    what JSON cannot hold, is left out (logged), the others' records are kept."""
    import types

    from ui import room_work, walk
    from ui.step_parts import RoomMeasure, Step

    def plain(name, measure):
        return Step(name, order=len(name), icon="", page="", room_measure=RoomMeasure(
            1, measure=measure, to_json=lambda x: {"x": x}, from_json=lambda raw, v: raw["x"]))

    steps = (plain("a", lambda a: a.n), plain("bb", lambda a: 1 / 0), plain("ccc", lambda a: object()))
    monkeypatch.setattr(walk, "pages", lambda: steps)
    got = room_work.steps_own(types.SimpleNamespace(n=12))
    assert got == {"a": {"version": 1, "record": {"x": 12}}}
    assert "bb" in caplog.text and "ccc" in caplog.text


@pytest.mark.parametrize("causal", [True, False])
def test_the_rooms_step_one_chart_counts_the_cells_each_way(causal):
    """An encoder's texts lie on n² (and a band on both sides), a decoder's on n(n+1)/2 —
    each counted here by loops — and the curves are named for the direction."""
    from types import SimpleNamespace

    from ui.i18n import Translator
    from pages import every_pair

    t = Translator("en")
    done = [SimpleNamespace(lang="en", owner=f"s{i}", numbers=made(n=n, causal=causal, layers=2, window=4,
                                                                     layer_types=("sliding", "full")))
            for i, n in enumerate((9, 13))]
    view = every_pair.room_cells(t, done, {})
    seen = lambda n, w: sum(1 for i in range(n) for j in range(n)  # noqa: E731
                            if (j <= i or not causal) and (w is None or abs(i - j) < w))
    assert view.where == {"s0": (9, seen(9, None)), "s1": (13, seen(13, None))}
    names = [tr.name for tr in view.figure.data]
    both = "" if causal else "_both"
    assert t(f"room.curve_full{both}") in names and t(f"room.curve_sliding{both}", w="4") in names
    sliding = next(tr for tr in view.figure.data if tr.name == t(f"room.curve_sliding{both}", w="4"))
    assert [y for x, y in zip(sliding.x, sliding.y) if x == 13] == [seen(13, 4)]
