"""What a teacher takes home from a class, as CSV: the room's numbers (one row a measured
text: its language, its tokens, each step's numbers — never its words) and the class's
votes (a row an option of each vote: its count, whether it was the measured answer, and
for a question voted twice how many students changed their answer). Pure Python, no
Streamlit; column names are stable English identifiers (a spreadsheet's, not the page's)."""

from __future__ import annotations

import csv
import io

from attn import room_numbers

from .class_reads import ClassState


def _csv(header: list[str], rows: list[list]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def room_csv(texts: list) -> str:
    """One row a measured text of the room (server.texts.RoomText), in the order sent."""
    done = [t for t in texts if t.numbers]
    if not done:
        return _csv(["text", "language", "tokens"], [])
    layers = max(t.numbers["layers"] for t in done)
    methods = sorted({m for t in done for m in t.numbers["errors"]})
    header = (["text", "language", "tokens", "p"]
              + [f"share_first_layer{i}" for i in range(layers)] + [f"share_whole_layer{i}" for i in range(layers)]
              + ["layers_share_fell"] + [f"kept_window{w}" for w in room_numbers.ROOM_WINDOWS]
              + ["sink_share", "kept_window_alone", "kept_window_hubs", "hub_window", "error_layer", "error_window"]
              + [f"error_{m}" for m in methods])
    rows = []
    for i, t in enumerate(done, start=1):
        nums = t.numbers
        first = [nums["useful"][layer][0][2] if layer < nums["layers"] else "" for layer in range(layers)]
        whole = [nums["useful"][layer][-1][2] if layer < nums["layers"] else "" for layer in range(layers)]
        fell = room_numbers.layers_fell(nums)
        rows.append([i, t.lang, nums["n"], nums["p"], *first, *whole, "" if fell is None else fell[0],
                     *(nums["kept"][str(w)]["mean"] for w in room_numbers.ROOM_WINDOWS),
                     nums["sink_mean"], nums["kept_window"], nums["kept_window_hubs"], nums["hub_window"],
                     nums["error_layer"], nums["error_window"], *(nums["errors"].get(m, "") for m in methods)])
    return _csv(header, rows)


def votes_csv(found: ClassState, answers: list[tuple[int, str, int]]) -> str:
    """A row an option of every vote, in the order opened: question id, step, round,
    state, option (its value as asked), the students who chose it, whether it is the
    measured answer, and — on a question's second round — how many students who answered
    both rounds changed their answer (``answers``: (vote, student, choice) rows)."""
    by_vote: dict[int, dict[str, int]] = {}
    for vote, student, choice in answers:
        by_vote.setdefault(vote, {})[student] = choice
    rows = []
    for v in found.votes:
        changed = ""
        if v.round > 1:
            before = next((w for w in found.votes if w.qid == v.qid and w.round == v.round - 1), None)
            if before is not None:
                a, b = by_vote.get(before.vote, {}), by_vote.get(v.vote, {})
                changed = sum(1 for s in set(a) & set(b) if a[s] != b[s])
        counts = found.counts.get(v.vote) or [0] * len(v.question["options"])
        for option, value in enumerate(v.question["options"]):
            rows.append([v.qid, v.step, v.round, v.state, value, counts[option],
                         int(option == v.question["answer"]), changed])
    return _csv(["question", "step", "round", "state", "option", "count", "measured_answer", "changed_answer"],
                rows)
