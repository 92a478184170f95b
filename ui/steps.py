"""The pages of the walk, each declared once: the app's navigation, the tests, the
browser tests and the latency benchmark read this list; a step's questions (by stable
id) and the settings its summary is built from are declared here too, and the summary,
the prebuild, the guess and reveal keys, the handout, the class's votes and the harness
read them. A step's settings are the rows of ui.setting_table whose page is the step."""

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
    # its predict-then-reveal questions, in the order the page asks them, each by an id that
    # never changes (a vote in the store names it; a second vote on it is its round 2)
    questions: tuple[str, ...] = ()
    summary_from: tuple[str, ...] = ()  # the settings (ui.setting_table rows) its summary is built from
    # what the room shows on it of every text of a class (ui.classroom.room_charts; "": nothing per
    # text to show, as step 5's algebra and step 7's timing): a chart of attn.room_numbers's numbers
    room: str = ""

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
    Step(1, "pages/1_every_pair.py", "every-pair", ":material/grid_on:", questions=("s1.doubling",),
         summary_from=("s1_layer", "s1_head"), room="cells"),
    Step(2, "pages/2_nearly_empty.py", "nearly-empty", ":material/grain:", questions=("s2.cells",),
         summary_from=("s2_layer", "s2_head", "s2_p"), room="useful"),
    Step(3, "pages/3_neighbours.py", "neighbours", ":material/swap_horiz:", questions=("s3.reach",),
         summary_from=("s3_layer", "s3_head", "s3_w", "s3_rw", "s3_rl"), room="window"),
    Step(4, "pages/4_hubs.py", "hubs", ":material/hub:", questions=("s4.hops",), summary_from=("s4_hubs", "s4_w"),
         room="sink"),
    Step(5, "pages/5_linear.py", "linear", ":material/linear_scale:", questions=("s5.order",),
         summary_from=("s5_layer", "s5_feature", "s5_causal")),
    Step(6, "pages/6_honest_catch.py", "honest-catch", ":material/balance:", questions=("s6.closest",),
         summary_from=("s6_layer", "s6_head", "s6_w", "s6_hubs"), room="errors"),
    Step(7, "pages/7_payoff.py", "payoff", ":material/speed:", questions=("s7.ratio",)),
    Step(8, "pages/8_closing.py", "closing", ":material/school:", is_step=False, heading="closing.title",
         room="verdict"),
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
QUESTIONS = {qid: p.number for p in STEPS for qid in p.questions}  # every question's id → its step


def first_questions() -> dict[int, str]:
    """Each step's first question: what a vote stored before questions had ids was about."""
    return {p.number: p.questions[0] for p in STEPS if p.questions}
