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
    assert "Provenance" in path.read_text() and "git commit" in path.read_text()
    return page
