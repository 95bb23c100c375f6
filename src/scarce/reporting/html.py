"""One self-contained HTML page per report: the Markdown report rendered, its figures embedded.

``report/index.html`` opens anywhere without its folder: each figure is a PNG data URI, each
table carries the heading it sits under as its caption and sorts by a column when its header
is clicked, and the page opens with the provenance of the report (date, git commit, versions)
and then the report's own summary of what was run. The Markdown report beside it stays the
source of the text.
"""

from __future__ import annotations

import base64
import datetime
import html
import re
from pathlib import Path
from typing import Any

from scarce._atomic import atomic_write_text

__all__ = ["run_provenance", "write_html"]

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #3f51b5; padding-bottom: .3rem; }
h2 { margin-top: 2.2rem; color: #283593; }
table { border-collapse: collapse; margin: .8rem 0 1.2rem; font-size: .85rem; display: block; overflow-x: auto; }
caption { caption-side: top; text-align: left; font-weight: 600; padding: .3rem 0; color: #444; }
caption.repeat { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: right; white-space: nowrap; }
th { background: #eef0f8; cursor: pointer; position: sticky; top: 0; }
td:first-child, th:first-child { text-align: left; }
tr:nth-child(even) td { background: #fafafa; }
img { max-width: 100%; border: 1px solid #ddd; margin: .5rem 0 1.5rem; }
code { background: #f3f3f3; padding: 0 .2rem; border-radius: 3px; }
.provenance { font-size: .85rem; color: #555; }
"""

_SORT = """
document.querySelectorAll("table").forEach(function (table) {
  table.querySelectorAll("th").forEach(function (th, column) {
    th.title = "sort by this column";
    th.addEventListener("click", function () {
      var body = table.tBodies[0], rows = Array.from(body.rows), up = th.dataset.up !== "1";
      var key = function (row) { var t = row.cells[column].textContent.trim(), v = parseFloat(t.replace(/,/g, ""));
                                 return isNaN(v) ? t : v; };
      rows.sort(function (a, b) { var x = key(a), y = key(b);
        return (typeof x === typeof y ? (x > y) - (x < y) : (typeof x === "number" ? -1 : 1)) * (up ? 1 : -1); });
      th.dataset.up = up ? "1" : "0";
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def _embed_figures(body: str, base: Path) -> str:
    """``<img src="figures/x.png">`` as data URIs (a missing file keeps its path and is named)."""
    def embed(match: re.Match[str]) -> str:
        path = base / html.unescape(match.group(2))
        if not path.is_file():
            return f'{match.group(1)}{match.group(2)}{match.group(3)} data-missing="true"'
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f"{match.group(1)}data:image/png;base64,{data}{match.group(3)}"

    return re.sub(r'(<img[^>]*\bsrc=")([^"]+\.png)(")', embed, body)


def _captions(body: str) -> str:
    """Each ``<table>`` gets the text of the heading it sits under as its ``<caption>``.

    A table right under its heading (nothing between them) would show the same words twice, so
    its caption is there for screen readers and hidden on the page (class ``repeat``).
    """
    out, heading, last, heading_end = [], "", 0, -1
    for match in re.finditer(r"<h[1-4][^>]*>(.*?)</h[1-4]>|<table>", body, flags=re.S):
        if match.group(0).startswith("<h"):
            heading, heading_end = re.sub(r"<[^>]+>", "", match.group(1)).strip(), match.end()
            continue
        repeat = bool(heading) and not body[heading_end:match.start()].strip()
        attribute = ' class="repeat"' if repeat else ""
        out.append(body[last:match.end()])
        out.append(f"<caption{attribute}>{heading or 'Table'}</caption>")
        last = match.end()
    out.append(body[last:])
    return "".join(out)


def write_html(markdown_path: str | Path, title: str, *, provenance: dict[str, Any] | None = None) -> Path:
    """Render ``markdown_path`` (a report.md) as ``index.html`` beside it; returns its path."""
    import markdown

    source = Path(markdown_path)
    body = markdown.markdown(source.read_text(encoding="utf-8"), extensions=["tables"])
    body = _captions(_embed_figures(body, source.parent))
    facts = {"written": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
             **(provenance or {})}
    items = "".join(f"<li><b>{html.escape(str(k))}</b>: {html.escape(str(v))}</li>" for k, v in facts.items())
    provenance_block = f'<ul class="provenance">{items}</ul>'
    # the run's date and commit open the page, under its title, before the report's own summary
    body = re.sub(r"(</h1>)", lambda m: m.group(1) + provenance_block, body, count=1) if "</h1>" in body \
        else provenance_block + body
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>\n{body}\n"
            f"<script>{_SORT}</script></body></html>\n")
    path = source.parent / "index.html"
    atomic_write_text(path, page)
    return path


def run_provenance() -> dict[str, Any]:
    """The git commit and versions of this process (what the report was built with)."""
    from scarce.experiments.store import provenance

    info = provenance()
    versions = info.get("versions") or {}
    return {"git commit": info.get("git") or "unknown (not a git checkout)",
            "versions": ", ".join(f"{k} {v}" for k, v in versions.items())}
