import collections

import pytest
import torch

from attn import graph


def reach_by_bfs(n: int, w: int, layers: int) -> torch.Tensor:
    """Plain breadth-first search from each query i back along the edges of a causal
    window (i sees j when i − w < j <= i), at most ``layers`` steps deep."""
    sees = {i: [j for j in range(n) if i - w < j <= i] for i in range(n)}
    reach = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        depth = {i: 0}
        todo = collections.deque([i])
        while todo:
            cur = todo.popleft()
            reach[i, cur] = True
            if depth[cur] < layers:
                for j in sees[cur]:
                    if j not in depth:
                        depth[j] = depth[cur] + 1
                        todo.append(j)
    return reach


# size by hand: each layer adds the w − 1 tokens before the farthest reached, plus itself
@pytest.mark.parametrize("w,layers,size", [(2, 1, 2), (3, 2, 5), (4, 3, 10), (5, 4, 17), (8, 2, 15)])
def test_reach_of_a_causal_window_after_L_layers_is_L_times_w_minus_1_plus_1(w, layers, size):
    n = 64
    reach = graph.reach_after_layers(n, w, layers, causal=True)
    assert torch.equal(reach, reach_by_bfs(n, w, layers))
    assert graph.reach_size(w, layers) == size
    rows = reach.sum(dim=1)
    for i in range(n):
        assert int(rows[i]) == min(i + 1, size)
    assert not reach.triu(1).any()  # nothing from the future


def test_reach_after_zero_layers_is_the_token_itself():
    assert torch.equal(graph.reach_after_layers(9, 3, 0), torch.eye(9, dtype=torch.bool))


def test_bidirectional_hops_with_a_hub_are_at_most_two():
    n, w = 80, 3
    no_hub = graph.hops(n, w, (), causal=False)
    with_hub = graph.hops(n, w, (40,), causal=False)
    assert int(no_hub.max()) > 2  # a far pair needs many layers without hubs
    assert int(no_hub[0, n - 1]) == -(-(n - 1) // (w - 1))  # ceil((n-1)/(w-1))
    assert int(with_hub.max()) <= 2 and int(with_hub.min()) >= 0
    assert torch.equal(torch.diagonal(with_hub), torch.zeros(n, dtype=torch.long))


def test_in_a_causal_model_the_first_token_is_a_sink_not_a_relay():
    n, w = 60, 3
    causal = graph.hops(n, w, (0,), causal=True)
    # token 5 reaches token 59 only along the window chain, never through the hub
    assert int(causal[59, 5]) == -(-(59 - 5) // (w - 1)) > 2
    # the hub itself is reached from nobody but itself, and later tokens never reach earlier ones
    assert causal[0, 1:].eq(-1).all()
    assert int(causal[59, 0]) == 1  # every token reads the sink directly
    bidir = graph.hops(n, w, (0,), causal=False)
    assert int(bidir[59, 5]) == 2


def test_route_goes_through_the_hub_when_it_is_shorter():
    n, w = 40, 2
    hop = graph.hops(n, w, (20,), causal=False)
    adj = graph.adjacency(n, w, (20,), causal=False)
    path = graph.route(hop, adj, 39, 0)
    assert path == [0, 20, 39]
    assert graph.route(graph.hops(n, w, (0,), causal=True), graph.adjacency(n, w, (0,), True), 0, 5) == []


@pytest.mark.parametrize("causal", [False, True])
def test_a_grid_with_unreachable_pairs_has_no_farthest_distance(causal):
    n = 12
    alone = graph.hops(n, 1, (), causal=causal)  # w = 1: a token sees only itself
    assert graph.farthest_pair(alone, causal) is None
    assert graph.pairs_never_joined(alone, causal) == (n * (n - 1) // 2 if causal else n * (n - 1))
    two = graph.hops(n, 2, (), causal=causal)  # w = 2: every pair joined, one layer per step
    assert graph.farthest_pair(two, causal) == n - 1 and graph.pairs_never_joined(two, causal) == 0
    hub = graph.hops(n, 1, (5,), causal=causal)
    if causal:  # a causal hub at 5 joins j <= 5 <= i only; others stay apart
        assert graph.farthest_pair(hub, causal) is None
        assert hub[11, 2] == 2 and hub[4, 2] == -1
    else:  # bidirectional: everything within two hops through the hub
        assert graph.farthest_pair(hub, causal) == 2


def test_a_causal_hub_in_the_middle_relays_every_pair_around_it():
    n, w, h = 48, 4, 20
    plain = graph.hops(n, w, (), causal=True)
    hub = graph.hops(n, w, (h,), causal=True)
    assert graph.farthest_pair(plain, True) == 16
    assert graph.farthest_pair(hub, True) < graph.farthest_pair(plain, True)
    for i in range(h, n):
        for j in range(h + 1):
            assert 0 <= hub[i, j] <= 2  # j -> hub -> i


def test_step3s_question_has_the_counted_reach_among_several_distinct_options():
    """The answer is the tokens that reach token rn − 1 after L layers of a causal window
    w, counted by multiplying the window's matrix L times (not read from the formula):
    it is always one of at least three distinct options, and it is the one that counts
    as right — 64, not the formula's 127, when the question names token 63 (w = 8,
    L = 18), and 3 on a 3-token text."""
    from ui.step_parts import nearest_option
    from pages.neighbours import reach_options

    for w, layers, rn in [(8, 18, 64), (2, 1, 64), (3, 1, 3), (3, 4, 64), (2, 2, 3), (8, 1, 64), (5, 3, 10)]:
        i, j = torch.arange(rn)[:, None], torch.arange(rn)[None, :]
        step = ((i - j >= 0) & (i - j < w)).float()
        reach = torch.eye(rn)
        for _ in range(layers):
            reach = ((reach @ step) > 0).float()
        counted = int(reach[rn - 1].sum())
        options = reach_options(w, layers, rn)
        assert len(options) >= 3 and len(set(options)) == len(options), (w, layers, rn, options)
        assert counted in options and nearest_option(options, counted) == counted
    assert 127 in reach_options(8, 18, 64)  # the uncapped formula is offered, and is wrong here
