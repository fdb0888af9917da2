"""The building blocks of the report pages (``html``): the one style sheet and script of a
self-contained page, escaping, and the small builders every section uses (tables, cards, search
boxes, embedded images, the page around them)."""

from __future__ import annotations

import base64
import html
import re
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from nlu_engine.evaluation.plots import NONE_LABEL

STYLE = """
:root { --fg:#1d2125; --muted:#5c6670; --line:#dde1e5; --accent:#1c64b4; --bad:#c92a2a; --good:#2b8a3e; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0 auto; max-width: 1200px; padding: 0 20px 40px; }
header { border-bottom: 1px solid var(--line); padding: 16px 0 8px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: var(--muted); margin: 2px 0; word-break: break-all; }
nav a { margin-right: 14px; color: var(--accent); text-decoration: none; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.card .value { font-size: 22px; font-weight: 600; }
.card .label { color: var(--muted); font-size: 12px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0 10px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f6f8; position: sticky; top: 0; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th:after { content: " \\2195"; color: #aab; font-size: 11px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tfoot td { font-weight: 600; background: #fafbfc; }
.low { color: var(--bad); } .high { color: var(--good); }
.scroll { max-height: 560px; overflow: auto; border: 1px solid var(--line); border-radius: 4px; }
input.filter { width: 360px; max-width: 100%; padding: 5px 8px; border: 1px solid #b8c0c8;
               border-radius: 4px; }
.count { color: var(--muted); margin-left: 10px; }
figure { margin: 14px 0; } figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { color: var(--muted); font-size: 12px; }
.ent { background: #e7f0fb; border-radius: 3px; padding: 0 3px; white-space: nowrap; }
.notice { background: #fff4e6; border: 1px solid #ffd8a8; padding: 6px 10px; border-radius: 4px; }
"""


SCRIPT = """
(function () {
  function applyFilter(input) {
    var table = document.getElementById(input.getAttribute("data-table"));
    if (!table) return;
    var terms = input.value.toLowerCase().split(/\\s+/).filter(function (t) { return t; });
    var rows = table.tBodies[0].rows, shown = 0;
    for (var i = 0; i < rows.length; i++) {
      var text = rows[i].textContent.toLowerCase();
      var ok = terms.every(function (t) { return text.indexOf(t) >= 0; });
      rows[i].hidden = !ok;
      if (ok) shown++;
    }
    var counter = document.getElementById(table.id + "-count");
    if (counter) counter.textContent = shown + " of " + rows.length + " shown";
  }
  var inputs = document.querySelectorAll("input.filter");
  for (var i = 0; i < inputs.length; i++) {
    (function (input) {
      input.addEventListener("input", function () { applyFilter(input); });
      applyFilter(input);
    })(inputs[i]);
  }
  var query = new URLSearchParams(window.location.search).get("q");
  var search = document.getElementById("error-search");
  if (query !== null && search) { search.value = query; applyFilter(search); }

  function cellValue(row, index) {
    var cell = row.cells[index];
    return cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent;
  }
  function sortBy(th) {
    var table = th.closest("table"), body = table.tBodies[0];
    var index = Array.prototype.indexOf.call(th.parentNode.children, th);
    var ascending = th.getAttribute("data-order") !== "asc";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index), y = cellValue(b, index);
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return ascending ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    th.setAttribute("data-order", ascending ? "asc" : "desc");
  }
  var headers = document.querySelectorAll("table.sortable thead th");
  for (var j = 0; j < headers.length; j++) {
    headers[j].addEventListener("click", function (event) { sortBy(event.currentTarget); });
  }
  function ready() {
    var loaded = 0;
    for (var k = 0; k < document.images.length; k++) {
      if (document.images[k].complete && document.images[k].naturalWidth > 0) loaded++;
    }
    document.body.setAttribute("data-images-loaded", String(loaded));
    document.body.setAttribute("data-ready", "1");
  }
  if (document.readyState === "complete") ready(); else window.addEventListener("load", ready);
})();
"""


# --- small builders ----------------------------------------------------------------------------
def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def label_text(label: str | None) -> str:
    return label if label else NONE_LABEL


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "x"


def num(value: Any, digits: int = 4, score: bool = True) -> str:
    """A numeric cell (sortable by its exact value); a ``score`` below 0.5 is shown in red."""
    if isinstance(value, float):
        css = " low" if score and value < 0.5 else ""
        return f'<td class="num{css}" data-value="{value!r}">{value:.{digits}f}</td>'
    return f'<td class="num" data-value="{esc(value)}">{esc(value)}</td>'


def table(
    headers: Sequence[str],
    rows: Iterable[str],
    *,
    table_id: str | None = None,
    sortable: bool = False,
    foot: Iterable[str] = (),
    numeric_from: int = 1,
    numeric_to: int | None = None,
) -> str:
    """A table from pre-rendered ``<tr>`` rows; header cells ``numeric_from`` to ``numeric_to``
    (exclusive; default: the last) are right-aligned like their numbers."""
    attrs = f' id="{esc(table_id)}"' if table_id else ""
    attrs += ' class="sortable"' if sortable else ""
    head = "".join(
        f'<th class="num">{esc(h)}</th>'
        if numeric_from <= i < (len(headers) if numeric_to is None else numeric_to)
        else f"<th>{esc(h)}</th>"
        for i, h in enumerate(headers)
    )
    foot_rows = "".join(foot)
    foot_html = f"<tfoot>{foot_rows}</tfoot>" if foot_rows else ""
    return (f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody>"
            f"{foot_html}</table>")


def card(value: str, label: str) -> str:
    return (f'<div class="card"><div class="value">{esc(value)}</div>'
            f'<div class="label">{esc(label)}</div></div>')


def search_box(table_id: str, input_id: str, placeholder: str) -> str:
    return (f'<p><input type="search" class="filter" id="{esc(input_id)}" data-table="{esc(table_id)}" '
            f'placeholder="{esc(placeholder)}" aria-label="{esc(placeholder)}">'
            f'<span class="count" id="{esc(table_id)}-count"></span></p>')


def image_tag(title: str, path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return (f'<figure><a href="{esc(Path(path).name)}" target="_blank">'
            f'<img src="data:image/png;base64,{data}" alt="{esc(title)}"></a>'
            f"<figcaption>{esc(title)} ({esc(Path(path).name)})</figcaption></figure>")


def page(title: str, meta: Sequence[str], nav: Sequence[tuple[str, str]], body: str) -> str:
    nav_html = "".join(f'<a href="#{esc(anchor)}">{esc(text)}</a>' for anchor, text in nav)
    meta_html = "".join(f'<p class="meta">{m}</p>' for m in meta)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n<body>"
        f"<header><h1>{esc(title)}</h1>{meta_html}<nav>{nav_html}</nav></header>\n"
        f"{body}\n<footer><p class=\"meta\">nlu_engine · written {esc(time.strftime('%Y-%m-%d %H:%M:%S'))}"
        f"</p></footer>\n<script>{SCRIPT}</script></body></html>\n"
    )
