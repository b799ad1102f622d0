"""The HTML pieces a notebook display is made of, each well-formed XHTML (every tag closed, every text
escaped): a titled block of preformatted text (a report vitlab already renders as text), a PNG embedded as a
data URI, a figure as PNG bytes, and the subset of Markdown vitlab's own reports are written in (headings,
tables, lists, paragraphs, images beside the report) turned into HTML."""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)")
INLINE = re.compile(r"\*\*(?P<bold>[^*]+)\*\*|`(?P<code>[^`]+)`")


def text_block(text: str, title: str | None = None) -> str:
    """``text`` as a ``<pre>`` block under a ``<strong>`` ``title``."""
    head = f"<p><strong>{html.escape(title)}</strong></p>" if title else ""
    return f'{head}<pre style="line-height:1.25">{html.escape(text)}</pre>'


def png_image(png: bytes, alt: str) -> str:
    """An ``<img/>`` of ``png`` (bytes) embedded as a data URI, at most as wide as the notebook's cell."""
    data = base64.b64encode(png).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{html.escape(alt)}" style="max-width:100%" />'


def figure_png(fig: Any, dpi: int = 100) -> bytes:
    """A matplotlib ``Figure``'s PNG bytes (the figure's own canvas: no pyplot, no global backend)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=dpi, bbox_inches="tight")
    return out.getvalue()


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An HTML table of ``header`` and ``rows`` of cells (each cell's text as given, escaped)."""
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_inline(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _inline(text: str) -> str:
    """Escaped ``text`` with Markdown's ``**bold**`` and ```code``` as tags."""
    out, at = [], 0
    for match in INLINE.finditer(text):
        out.append(html.escape(text[at : match.start()]))
        bold, code = match.group("bold"), match.group("code")
        out.append(f"<strong>{html.escape(bold)}</strong>" if bold is not None else f"<code>{html.escape(code)}</code>")
        at = match.end()
    return "".join(out) + html.escape(text[at:])


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def markdown_html(text: str, folder: Path | None = None) -> str:
    """vitlab's report Markdown (``report.md``, ``audit.md``) as HTML: ``#`` headings, ``|`` tables, ``-``
    lists, paragraphs, and ``![alt](file.png)`` images read from ``folder`` and embedded (an image that is not
    there is named, not linked)."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
        elif line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")) + 2, 6)  # report headings under the notebook's own
            out.append(f"<h{level}>{_inline(line.lstrip('#').strip())}</h{level}>")
            i += 1
        elif line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            rows = [_cells(b) for b in block if not set(b.replace("|", "").strip()) <= set("-: ")]
            out.append(table(rows[0], rows[1:]) if rows else "")
        elif line.lstrip().startswith("- "):
            items = []
            while i < len(lines) and lines[i].lstrip().startswith("- "):
                items.append(f"<li>{_inline(lines[i].lstrip()[2:])}</li>")
                i += 1
            out.append(f"<ul>{''.join(items)}</ul>")
        elif (image := IMAGE.fullmatch(line.strip())) is not None:
            path = None if folder is None else folder / image.group("src")
            if path is not None and path.is_file() and path.suffix == ".png":
                out.append(f"<p>{png_image(path.read_bytes(), image.group('alt'))}</p>")
            else:
                out.append(f"<p><em>{html.escape(image.group('alt'))} ({html.escape(image.group('src'))})</em></p>")
            i += 1
        else:
            paragraph = []
            while i < len(lines) and lines[i].strip() and not lines[i].startswith(("#", "|")):
                if IMAGE.fullmatch(lines[i].strip()) or lines[i].lstrip().startswith("- "):
                    break
                paragraph.append(lines[i].strip())
                i += 1
            out.append(f"<p>{_inline(' '.join(paragraph))}</p>")
    return "".join(out)


def frame(body: str) -> str:
    """``body`` in one ``<div>``, the root a notebook display returns."""
    return f'<div class="vitlab">{body}</div>'


__all__ = ["figure_png", "frame", "markdown_html", "png_image", "table", "text_block"]
