"""A strip of markers beside an attention grid's rows that a reader can tap: Plotly's point
selection (``st.plotly_chart(on_select=…)``), which a heat map's cells do not give, picks the
row under the finger. Step 1 follows that row's token (``widgets.follow_tapped``)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .figures import OKABE_ITO, FrozenFigure, safe

STRIP = "row strip"  # the name of the tappable strip's trace (a page finds the tap by it)


def added(fig, labels, factor: int, chosen: int, hover: str, colour: str = OKABE_ITO[3]):
    """A copy of heat map ``fig`` with a strip of markers left of its first column, one a
    drawn row (each pooled row names its middle token), the ``chosen`` token's in
    ``colour``: a tap on the strip picks that row's token (``st.plotly_chart``'s point
    selection, which a heat map's cells do not give). ``hover`` may use %{customdata[0]}
    (the token's position) and %{customdata[1]} (its label)."""
    out = go.Figure(fig.to_dict() if isinstance(fig, FrozenFigure) else fig)
    n = len(labels)
    rows = -(-n // factor)
    tokens = [min(n - 1, r * factor + (factor - 1) // 2) for r in range(rows)]
    ys = np.arange(rows) * factor + (factor - 1) / 2 if factor > 1 else np.arange(rows)
    mark = chosen // factor
    gap = max(1.5, 0.025 * n)  # a little left of the first column (x = −0.5)
    out.add_trace(go.Scatter(
        x=np.full(rows, -gap, dtype=np.float32), y=ys.astype(np.float32), mode="markers", name=STRIP,
        marker={"symbol": "square", "size": 7, "color": ["#BBBBBB" if r != mark else colour for r in range(rows)]},
        customdata=np.array([[tok, safe(labels[tok])] for tok in tokens], dtype=object),
        hovertemplate=hover + "<extra></extra>", showlegend=False))
    return out


def token_of(point: dict, strip_curve: int, n: int, factor: int) -> int | None:
    """The token a tapped point of :func:`added` names (None: a point of another trace)."""
    if point.get("curve_number") != strip_curve or not isinstance(point.get("point_index"), int):
        return None
    return min(n - 1, max(0, point["point_index"] * factor + (factor - 1) // 2))
