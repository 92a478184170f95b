"""The pages of the walk, listed once: the app's navigation, the tests, the browser
tests and the latency benchmark all read this list."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    number: int  # 1..7 for the seven steps; the closing page comes after them
    path: str  # page file, relative to the repository root
    url_path: str
    icon: str
    is_step: bool = True  # the closing page and the playground are part of the walk, not steps
    heading: str = ""  # the locale key of a page's h1 that is not a step's

    @property
    def title_key(self) -> str:
        return f"nav.page{self.number}"

    @property
    def heading_key(self) -> str:
        """The locale key of the page's own title (its h1)."""
        return f"step{self.number}.title" if self.is_step else self.heading

    @property
    def default(self) -> bool:
        """The first step is the app's home page."""
        return self.number == 1

    @property
    def link(self) -> str:
        """The path of its URL: "" for the home page."""
        return "" if self.default else self.url_path


PAGES = [
    Step(1, "pages/1_every_pair.py", "every-pair", ":material/grid_on:"),
    Step(2, "pages/2_nearly_empty.py", "nearly-empty", ":material/grain:"),
    Step(3, "pages/3_neighbours.py", "neighbours", ":material/swap_horiz:"),
    Step(4, "pages/4_hubs.py", "hubs", ":material/hub:"),
    Step(5, "pages/5_linear.py", "linear", ":material/linear_scale:"),
    Step(6, "pages/6_honest_catch.py", "honest-catch", ":material/balance:"),
    Step(7, "pages/7_payoff.py", "payoff", ":material/speed:"),
    Step(8, "pages/8_closing.py", "closing", ":material/school:", is_step=False, heading="closing.title"),
    Step(9, "pages/9_playground.py", "playground", ":material/science:", is_step=False, heading="playground.title"),
]
STEPS = [p for p in PAGES if p.is_step]


def page_of(number) -> Step | None:
    """The page with this number, or None (a number a link or a class holds may be anything)."""
    return next((p for p in PAGES if p.number == number), None)
CLOSING = next(p for p in PAGES if p.url_path == "closing")
PLAYGROUND = next(p for p in PAGES if p.url_path == "playground")
N_STEPS = len(STEPS)
PAGE_FILES = [p.path for p in PAGES]
LINKS = [p.link for p in PAGES]
