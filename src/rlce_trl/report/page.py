"""The HTML page: one self-contained file (inline CSS, JS and SVG, the data as embedded JSON), no network needed.

Model outputs reach the page only as data: the script puts them into the DOM with `textContent`, never as markup.
"""

from __future__ import annotations

import json
from html import escape

from ..audit import plain

CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#243447;color:#fff;padding:12px 20px}header h1{margin:0;font-size:20px}
header .sub{opacity:.8;font-size:13px}main{padding:12px 20px}
section{background:#fff;border:1px solid #ddd;border-radius:6px;padding:10px 14px;margin-bottom:16px}
h2{font-size:17px;margin:4px 0 10px}.notes li{color:#8a4b00}
.curves{display:flex;flex-wrap:wrap;gap:10px}.curve .frame{fill:none;stroke:#999}.curve .grid{stroke:#eee}
.curve .tick,.curve .legend{font-size:10px;fill:#444}.curve .ctitle{font-size:12px;font-weight:600}
.filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center;margin-bottom:8px}
.filters label{font-size:13px}#count{color:#555}
.browser{display:flex;gap:14px;align-items:flex-start}.list{flex:0 0 46%;max-height:640px;overflow:auto}
#detail{flex:1;min-width:0}table{border-collapse:collapse;width:100%}
th,td{border-bottom:1px solid #eee;padding:3px 6px;text-align:left;vertical-align:top;font-size:13px}
th{background:#f3f3f3}.list th,.comp th{position:sticky;top:0}#groups tbody tr{cursor:pointer}
#groups tbody tr:hover{background:#eef4ff}
#groups tbody tr.sel{background:#dbe8ff}pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;
padding:6px;max-height:220px;overflow:auto;font-size:12px;margin:4px 0}
.st{padding:1px 6px;border-radius:8px;font-size:12px;background:#eee}
.st-verified,.st-judged,.st-scored{background:#d4f5d4}
.st-tie{background:#ffe9b3}.st-no_winner,.st-none_correct{background:#f6d5d5}.st-verifier_failed{background:#f3b0b0}
.v-yes{color:#17803d;font-weight:600}.v-no{color:#b42318;font-weight:600}.v-unknown{color:#666}
.win{font-weight:700}.muted{color:#777}.comp{max-height:520px;overflow:auto}
.strip{display:flex;flex-wrap:wrap;gap:10px;padding:8px 10px}.stat{flex:1 1 120px;padding:4px 10px;
border-left:3px solid #243447;cursor:help}.stat .v{font-size:20px;font-weight:600}.stat.wide{flex:2 1 240px}
.stat.wide .v{font-size:16px;line-height:24px}.stat .l{font-size:12px;color:#555;
text-transform:uppercase;letter-spacing:.04em}.curve .axis{font-size:11px;fill:#333}a.full{font-size:12px;
white-space:nowrap}.legend-item{cursor:help}
"""

JS = r"""
(function(){
'use strict';
const D = JSON.parse(document.getElementById('rlce-data').textContent);
const groups = D.groups, byId = new Map(groups.map(g => [g.id, g]));
const $ = id => document.getElementById(id);
function el(tag, attrs, ...kids){
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) { if (k === 'class') e.className = v; else e.setAttribute(k, v); }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? '' : String(k)));
  return e;
}
const fmt = x => (x == null ? 'n/a'
  : (typeof x === 'number' ? (Number.isInteger(x) ? String(x) : x.toFixed(3)) : String(x)));
const label = i => (i == null ? '-' : 'A' + (i + 1));
// a long text arrives capped: {text: head + '…', full: 'full/<hash>.txt', chars: N}
const isCapped = v => v != null && typeof v === 'object' && typeof v.full === 'string';
const T = v => (isCapped(v) ? v.text : (v == null ? '' : String(v)));
const full = v => el('a', {class: 'full', href: v.full, target: '_blank'},
  'full text (' + v.chars.toLocaleString('en') + ' characters)');
const N = v => (isCapped(v) ? el('span', {}, v.text, ' ', full(v)) : T(v));
// a text in a scrolling box, the link to a capped text's full text below the box (not inside it)
const P = v => (isCapped(v) ? el('div', {}, el('pre', {}, v.text), full(v)) : el('pre', {}, T(v)));
const cut = (s, n) => (s.length > n ? s.slice(0, n) + '…' : s);
function verdictsOf(g){ return new Set((g.tests || []).map(t => t.verdict || 'none')); }

function fillSelect(sel, values){ for (const v of values) sel.append(el('option', {value: String(v)}, String(v))); }
if ($('f-status')) {
  fillSelect($('f-status'), [...new Set(groups.map(g => g.status))].sort());
  fillSelect($('f-step'), [...new Set(groups.map(g => g.step))].sort((a, b) => a - b));
  fillSelect($('f-verdict'), [...new Set(groups.flatMap(g => [...verdictsOf(g)]))].sort());
}

function matches(g){
  const st = $('f-status').value, sp = $('f-step').value, vd = $('f-verdict').value;
  const q = $('f-text').value.trim().toLowerCase();
  if (st && g.status !== st) return false;
  if (sp && String(g.step) !== sp) return false;
  if (vd && !verdictsOf(g).has(vd)) return false;
  if (q && !(g.answers || []).some(a => T(a).toLowerCase().includes(q))
        && !T(g.verified_answer).toLowerCase().includes(q)) return false;
  return true;
}

function renderList(){
  const body = $('groups').tBodies[0];
  body.replaceChildren();
  let shown = 0;
  for (const g of groups) {
    if (!matches(g)) continue;
    shown++;
    const tr = el('tr', {'data-id': g.id},
      el('td', {}, g.id), el('td', {}, g.step), el('td', {}, el('span', {class: 'st st-' + g.status}, g.status)),
      el('td', {}, (g.answers || []).length), el('td', {}, (g.tests || []).length),
      el('td', {title: T(g.verified_answer)}, cut(T(g.verified_answer), 80)));
    tr.addEventListener('click', () => { location.hash = 'group=' + encodeURIComponent(g.id); });
    body.append(tr);
  }
  $('count').textContent = shown + ' of ' + groups.length + ' groups';
}

function table(head, rows){
  return el('table', {}, el('thead', {}, el('tr', {}, ...head.map(h => el('th', {}, h)))),
    el('tbody', {}, ...rows.map(r => el('tr', {}, ...r.map(c => el('td', {}, c))))));
}

function showGroup(id){
  const g = byId.get(id), box = $('detail');
  box.replaceChildren();
  for (const tr of $('groups').tBodies[0].rows) tr.classList.toggle('sel', tr.dataset.id === id);
  if (!g) { box.append(el('p', {class: 'muted'}, 'No group ' + id + ' in this report.')); return; }
  box.append(el('h3', {}, 'Group ' + g.id + ' · step ' + g.step + ' · ' + g.mode + ' · ' + g.method + ' · ',
                el('span', {class: 'st st-' + g.status}, g.status)));
  if (g.labels) box.append(el('p', {}, 'Labels: ' + g.labels.map(T).join(', ')));
  box.append(el('details', {}, el('summary', {}, 'Prompt context'), P(g.context)));
  const counts = (g.answers || []).map((_, i) => (g.assignment || []).filter(a => a === i).length);
  box.append(el('h4', {}, 'Distinct answers'), table(['', 'answer', 'rollouts', 'score', ''],
    (g.answers || []).map((a, i) => [label(i), N(a), counts[i], fmt((g.scores || [])[i]),
      i === g.winner ? el('span', {class: 'win'}, '★ verified') : ''])));
  const tests = g.tests || [];
  const round = g.tie_break_round ? ', with a tie-break round' : '';
  box.append(el('h4', {}, 'Evidence tests (' + tests.length + ')' + round));
  if (tests.length) {
    box.append(table(['round', 'direction', 'test', 'verdict', 'p(verdict)'], tests.map(t => {
      // normalised over the choices (the report computes choice_probs); the raw log-probabilities in the tooltip
      const pr = t.choice_probs || {}, lp = t.choice_logprobs || {};
      const key = Object.keys(pr).find(k => k === t.verdict || k.endsWith('=' + t.verdict));
      const tip = 'normalised over the choices: ' + Object.entries(pr).map(([k, v]) => k + ' ' + v.toFixed(2))
        .join(', ') + '\nraw log-probabilities: ' + Object.entries(lp).map(([k, v]) => k + ' ' + fmt(v)).join(', ');
      const p = key ? el('span', {class: 'prob', title: tip}, pr[key].toFixed(2)) : '';
      const dir = t.against == null ? label(t.favoured) + ' (pointwise)'
        : label(t.favoured) + ' ≻ ' + label(t.against);
      const v = t.verdict || ('abstained' + (t.failure ? ': ' + t.failure : ''));
      const text = t.text == null
        ? el('span', {class: 'muted'}, 'construction failed: ' + (t.failure || '')) : N(t.text);
      return [t.round ? 'tie-break' : 'first', dir, text,
              el('span', {class: 'v-' + (t.verdict || 'none')}, v), p];
    })));
  } else box.append(el('p', {class: 'muted'}, 'No tests in this group (a single answer, or a method without tests).'));
  box.append(el('h4', {}, 'Rollouts'), table(['#', 'answer', 'reward', 'completion'],
    (g.completions || []).map((c, k) => [k, label((g.assignment || [])[k]), fmt((g.rewards || [])[k]),
                                         P(c)])));
  if (g.extra) box.append(el('h4', {}, 'Method details'), el('pre', {}, JSON.stringify(g.extra, null, 2)));
}

function route(){
  const m = /^#group=(.+)$/.exec(location.hash);
  if (m && $('detail')) { const id = decodeURIComponent(m[1]); showGroup(id); $('browser').scrollIntoView(); }
}
if ($('groups')) {
  for (const id of ['f-status', 'f-step', 'f-verdict', 'f-text']) $(id).addEventListener('input', renderList);
  renderList();
  window.addEventListener('hashchange', route);
  route();
}
})();
"""


def _json_script(data) -> str:
    text = json.dumps(plain(data), ensure_ascii=False, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _text_cell(value) -> str:
    """A prompt or completion: the text, or a capped text's head and a link to its full text (`texts.TextStore`)."""
    if isinstance(value, dict) and isinstance(value.get("full"), str):
        return (f"<pre>{escape(str(value.get('text', '')))}</pre><a class=\"full\" href=\"{escape(value['full'])}\" "
                f"target=\"_blank\">full text ({int(value.get('chars') or 0):,} characters)</a>")
    return f"<pre>{escape(str(value or ''))}</pre>"


def _strip_section(items) -> str:
    """The summary strip: one figure per item (`summary.Item`), what it is in a tooltip."""
    if not items:
        return ""
    cells = "".join(f'<div class="stat{" wide" if len(i.value) > 12 else ""}" title="{escape(i.detail)}" '
                    f'data-label="{escape(i.label)}"><div class="v">{escape(i.value)}</div><div class="l">'
                    f'{escape(i.label)}</div></div>' for i in items)
    return f'<section class="strip" id="summary" aria-label="Summary">{cells}</section>'


def _completions_section(rows: list[dict], columns: list[str]) -> str:
    if not rows:
        return ""
    shown = [c for c in ("step", "rlce_group", "prompt", "completion") if c in columns]
    # then the reward functions' columns (whatever the method), the rollout's answer, status, advantage
    shown += [c for c in columns if c not in shown and c not in ("rlce_scores", "rlce_verified_answer")][:7]
    head = "".join(f"<th>{escape('group' if c == 'rlce_group' else c)}</th>" for c in shown)
    body = []
    for row in rows:
        cells = []
        for c in shown:
            value = row.get(c)
            if c == "rlce_group" and value:
                cells.append(f'<td><a class="glink" href="#group={escape(str(value))}">{escape(str(value))}</a></td>')
            elif c in ("prompt", "completion"):
                cells.append(f"<td>{_text_cell(value)}</td>")
            elif isinstance(value, float):
                cells.append(f"<td>{value:.3f}</td>")
            else:
                cells.append(f"<td>{escape('' if value is None else str(value))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    note = "" if "rlce_group" in columns else '<p class="muted">This run\'s completions carry no group id, so they ' \
                                                  "do not link to groups.</p>"
    return (f'<section id="completions"><h2>Completions ({len(rows)} newest, newest first)</h2>{note}'
            f'<div class="comp"><table>'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div></section>")


def render(title: str, summary: str, notes: list[str], svgs: list[str], groups: list[dict], completions: list[dict],
           completion_columns: list[str], strip=(), health: str = "") -> str:
    notes_html = "".join(f"<li>{escape(n)}</li>" for n in notes)
    curves = "".join(svgs) or '<p class="muted">No metrics logged.</p>'
    browser = ""
    if groups:
        browser = """<section id="browser"><h2>Groups</h2><div class="filters">
<label>status <select id="f-status"><option value="">any</option></select></label>
<label>step <select id="f-step"><option value="">any</option></select></label>
<label>verdict <select id="f-verdict"><option value="">any</option></select></label>
<label>answer <input id="f-text" type="search" placeholder="answer text"></label><span id="count"></span></div>
<div class="browser"><div class="list"><table id="groups"><thead><tr><th>group</th><th>step</th><th>status</th>
<th>answers</th><th>tests</th><th>verified answer</th></tr></thead><tbody></tbody></table></div>
<div id="detail"><p class="muted">Pick a group to see its evidence.</p></div></div></section>"""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)}</title><style>{CSS}</style></head>
<body><header><h1>{escape(title)}</h1><div class="sub">{escape(summary)}</div></header><main>
{_strip_section(strip)}
{f'<section class="notes"><ul>{notes_html}</ul></section>' if notes else ''}
<section id="curves-section"><h2>Curves</h2><div class="curves" id="curves">{curves}</div></section>
{health}
{browser}
{_completions_section(completions, completion_columns)}
</main>
<script type="application/json" id="rlce-data">{_json_script({"groups": groups})}</script>
<script>{JS}</script></body></html>
"""
