"""The closing page: what a reader can safely ignore and still understand, written from
the reader's own numbers; in a class, the room's verdict on each claim of the lesson."""

from __future__ import annotations

import math

from attn import methods, room_numbers

from ui import room_figures
from ui.i18n import Translator
from ui.step_parts import RoomChart, RoomView, Step
from ui.walk import page_file

NEAR = 16  # the neighbourhood the summary speaks of: the 16 most recent tokens, each token itself included


def stray_digits(points) -> int:
    """The decimals the strays (in percentage points) are written with: 2, or more where the
    smallest needs them to show its first digit (at most 4), never a stray written as 0.00."""
    small = min((x for x in points if x > 0), default=0.0)
    return 2 if small <= 0 else min(4, max(2, -math.floor(math.log10(small))))


def room_verdict(t: Translator, done: list, cfg: dict) -> RoomView:
    """The class's verdict on each claim of the lesson, from every text it sent (a table)."""
    v = room_numbers.verdicts([(x.lang, x.numbers) for x in done])
    rows = []
    s = v.shrinks
    rows.append((t("room.claim_shrinks"), t("room.verdict_shrinks", held=t.int(s.held), n=t.int(s.of),
                                            langs=t.list(f"{room_figures.language(t, lang)} {t.int(a)}/{t.int(b)}"
                                                         for lang, (a, b) in s.langs.items()))))
    big = max(room_numbers.ROOM_WINDOWS)
    w = v.window[big]
    rows.append((t("room.claim_window", w=t.int(big)),
                 t("room.verdict_window", median=t.pct(w.median), most=t.int(w.most), n=w.of, w=t.int(big))
                 if w.of else t("room.verdict_window_none", w=t.int(big))))
    k = v.sink
    rows.append((t("room.claim_sink"), t("room.verdict_sink", median=t.pct(k.median), above=t.int(k.above),
                                         n=t.int(k.of))))
    own = methods.own().name
    cheap = [m for m in v.errors if m not in (own, "uniform")]
    rows.append((t("room.claim_price"), t("room.verdict_price", fused=t.sci(v.errors.get(own, 0.0)),
                                          lo=t.sci(min(v.errors[m] for m in cheap)) if cheap else "—",
                                          hi=t.sci(max(v.errors[m] for m in cheap)) if cheap else "—")))
    table = {t("room.col_claim"): [r[0] for r in rows], t("room.col_verdict"): [r[1] for r in rows]}
    return RoomView([t("room.verdict_caption", n=t.int(len(done)), p=t.pct(room_numbers.ROOM_P, 0))], table=table)


ID = "closing"
STEP = Step(ID, order=80, icon=":material/school:", page=page_file(__file__), is_step=False,
            room=(RoomChart("verdict", room_verdict),))
