"""Checks every report page must pass (used by the vision and LLM report tests)."""

from __future__ import annotations


def check_html_report(path):
    """The page parses, every figure is embedded, every table has a caption; returns what it found."""
    from html.parser import HTMLParser

    class Page(HTMLParser):
        def __init__(self):
            super().__init__()
            self.images, self.tables, self.captions, self.open_table = [], 0, 0, False

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if tag == "img":
                self.images.append(attrs.get("src", ""))
            elif tag == "table":
                self.tables += 1
            elif tag == "caption":
                self.captions += 1

    page = Page()
    page.feed(path.read_text())
    page.close()
    assert page.images and all(src.startswith("data:image/png;base64,") for src in page.images)
    assert page.tables and page.captions == page.tables
    text = path.read_text()
    assert "git commit" in text and text.index("git commit") < text.index("<h2")  # provenance opens the page
    return page


def figure_problems(fig, name, dpi=None):
    """What a reader would trip on in one matplotlib figure: an axes with data but no axis labels,
    text that overlaps other text (titles, axis labels, annotations, legend entries; tick labels are
    left out, their boxes are axis-aligned and rotated labels' boxes touch), or text cut off by the
    figure's edge."""
    if dpi is not None:  # the resolution the report's writer saves at
        fig.set_dpi(dpi)
    fig.tight_layout()  # as the report's writer lays figures out before it saves them
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = fig.bbox
    problems, boxes = [], []
    for ax in fig.axes:
        has_data = bool(ax.lines or ax.collections or ax.patches or ax.images)
        if has_data and not ax.get_ylabel():
            problems.append(f"{name}: an axes without a y label")
        labelled = [other for other in ax.get_shared_x_axes().get_siblings(ax)
                    if other.get_xlabel() or any(t.get_text() for t in other.get_xticklabels())]
        if has_data and not labelled:
            problems.append(f"{name}: an axes without an x label or tick labels (nor a shared one with them)")
        texts = [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            texts += list(legend.get_texts())
        for text in texts:
            if text.get_visible() and text.get_text().strip():
                box = text.get_window_extent(renderer)
                if box.x0 < frame.x0 - 1 or box.x1 > frame.x1 + 1 or box.y0 < frame.y0 - 1 or box.y1 > frame.y1 + 1:
                    problems.append(f"{name}: {text.get_text()[:40]!r} is cut off by the figure's edge")
                boxes.append((text.get_text()[:40], box))
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            if box_a.overlaps(box_b):
                problems.append(f"{name}: {a!r} overlaps {b!r}")
    return problems


def check_every_figure(monkeypatch):
    """Make every figure a report saves go through :func:`figure_problems` first; returns the lists
    the problems and the saved names are collected in."""
    from scarce.reporting import figures

    problems, seen = [], []
    original = figures.FigureWriter.save

    def checked(self, fig, name):
        problems.extend(figure_problems(fig, name, dpi=self.dpi))
        seen.append(name)
        original(self, fig, name)

    monkeypatch.setattr(figures.FigureWriter, "save", checked)
    return problems, seen
