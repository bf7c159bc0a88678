"""What abm's HTML report pages share: their style, and a page made from a Markdown report with
its plots (``abm learn``'s ``report.html``)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from abm.outputs.summary_table import SummaryTable

REPORT_CSS = """body { font: 14px/1.45 sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; margin: 12px 0; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
figure { display: inline-block; margin: 8px; } img { max-width: 720px; border: 1px solid #ddd; }
pre { background: #f7f7f7; padding: 8px; }"""
"""The style of abm's HTML reports (a run's, a comparison's, a sweep's, a calibration's, a learning run's)."""


def as_code(text: str) -> str:
    """``text`` escaped for a page, with what it writes in backticks (a command) shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def html_table(t: SummaryTable, *, title: bool = True) -> str:
    """``t`` as HTML: its title as a heading (``title``), the table (a cell's leading spaces, an
    indented row's, kept) and its caption as a paragraph (where it has one)."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in t.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell).replace('  ', '&nbsp;&nbsp;')}</td>" for cell in row) + "</tr>"
        for row in t.rows
    )
    heading = f"<h2>{html.escape(t.title)}</h2>" if title else ""
    caption = f"<p>{html.escape(t.caption)}.</p>" if t.caption else ""
    return f"{heading}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{caption}"


def markdown_page_html(title: str, markdown_text: str, images: list[str], files: dict[str, str]) -> str:
    """A page of ``markdown_text`` (a report.md: headings, paragraphs, tables; any HTML in it is
    shown as text), then the ``images`` (PNG files beside the page) and links to ``files``
    (name -> what it holds)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown_text)
    figures = "".join(
        f'<figure><img src="{html.escape(name)}" alt="{html.escape(name)}">'
        f"<figcaption>{html.escape(Path(name).stem.replace('_', ' '))}</figcaption></figure>"
        for name in images
    )
    links = "".join(
        f'<li><a href="{html.escape(name)}">{html.escape(name)}</a>: {html.escape(what)}</li>'
        for name, what in files.items()
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
{REPORT_CSS}
</style></head><body>
{body}
{"<h2>Plots</h2>" + figures if figures else ""}
<h2>Files</h2><ul>{links}</ul>
</body></html>
"""
