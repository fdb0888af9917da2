// nlu-engine review page. Every logged text is user input: it reaches the page only through
// textContent and attributes set with setAttribute, never as markup.
"use strict";

const $ = (id) => document.getElementById(id);
const state = {
  token: null, groups: [], index: 0, total: 0, intents: [], entityTypes: [], outOfScope: "out_of_scope",
  entities: [], edited: false, undo: [], selection: null, busy: false,
};

function loadToken() {
  const params = new URLSearchParams(location.search);
  if (params.has("token")) {
    sessionStorage.setItem("review-token", params.get("token"));
    history.replaceState(null, "", location.pathname);
  }
  state.token = sessionStorage.getItem("review-token");
}

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

function status(message, isError) {
  $("status").textContent = message || "";
  $("status").className = isError ? "error" : "";
}

async function api(path, body) {
  const headers = {};
  if (state.token) headers.Authorization = "Bearer " + state.token;
  const options = { headers, method: body === undefined ? "GET" : "POST" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(path, options);
  let data = {};
  try { data = await response.json(); } catch (e) { data = { error: response.statusText }; }
  if (!response.ok) {
    const error = new Error(data.error || ("HTTP " + response.status));
    error.status = response.status;
    throw error;
  }
  return data;
}

function fillList(id, values) {
  const list = $(id);
  list.replaceChildren(...values.map((value) => { const o = el("option"); o.value = value; return o; }));
}

async function refreshState() {
  const data = await api("/api/state");
  state.intents = data.intents;
  state.entityTypes = data.entity_types;
  state.outOfScope = data.out_of_scope;
  fillList("intents", state.intents);
  fillList("entity-types", state.entityTypes);
  const left = data.left_out && data.left_out.length ? `, ${data.left_out.length} left out` : "";
  $("written").textContent = data.file ? `(${data.labelled} in ${data.file}${left})` : "";
  showTraining(data.train);
}

async function loadInbox(keepId) {
  const data = await api("/api/inbox?limit=100");
  state.groups = data.groups;
  state.total = data.total;
  const at = keepId ? state.groups.findIndex((g) => g.id === keepId) : -1;
  state.index = at >= 0 ? at : Math.min(state.index, Math.max(0, state.groups.length - 1));
  $("counts").textContent = `${data.total} groups (${data.messages} messages) to review`;
  show();
  loadDone();
}

async function loadDone() {
  const data = await api("/api/done?limit=30");
  $("done").replaceChildren(...data.decisions.map((d) => {
    const item = el("li");
    item.append(el("span", d.decided.intent, "badge"), el("span", d.text));
    item.setAttribute("data-id", d.id);
    return item;
  }));
}

function current() { return state.groups[state.index]; }
function representative(group) { return group.messages[0]; }

function show() {
  const group = current();
  $("empty").hidden = !!group;
  $("current").hidden = !group;
  renderQueue();
  if (!group) return;
  const message = representative(group);
  state.entities = message.entities.map((e) => ({ ...e }));
  state.edited = false;
  closeEditors();
  $("reasons").replaceChildren(...group.reasons.map((r) => el("span", r, "badge")));
  $("guard").hidden = !group.guard;
  $("guard").textContent = group.guard ? guardText(group) : "";
  $("accept").disabled = !group.accept;
  $("accept").title = group.accept ? `label it ${group.accept}` : group.guard;
  const confidence = typeof message.confidence === "number" ? message.confidence.toFixed(3) : "?";
  $("predicted").textContent = `model: ${message.intent} (${confidence})`;
  $("position").textContent = `group ${state.index + 1} of ${state.total}, priority ${group.score}`;
  renderText();
  $("ranking").replaceChildren(...message.ranking.map((r, i) => {
    const item = el("li");
    item.append(el("span", r.name, "name"), el("span", " " + r.confidence.toFixed(3), "muted"));
    const bar = el("span", null, "bar");
    bar.style.width = Math.round(r.confidence * 120) + "px";
    item.append(bar);
    item.addEventListener("click", () => decide(message.ranking[i].name));
    return item;
  }));
  const size = group.size || group.messages.length;
  $("members-title").textContent = size > group.messages.length
    ? `${size} messages in this group: one decision labels the oldest ${group.messages.length}`
    : group.messages.length > 1 ? `${group.messages.length} messages in this group: one decision labels all` : "";
  $("members").replaceChildren(...(group.messages.length > 1
    ? group.messages.slice(0, 50).map((m) => el("li", m.text)) : []));
}

function renderText() {
  const text = representative(current()).text;
  const box = $("text");
  const parts = [];
  let position = 0;
  state.entities.sort((a, b) => a.start - b.start).forEach((entity, i) => {
    if (entity.start > position) parts.push(document.createTextNode(text.slice(position, entity.start)));
    const mark = el("mark", text.slice(entity.start, entity.end), "entity");
    mark.setAttribute("data-type", entity.entity);
    mark.setAttribute("data-index", String(i));
    mark.title = `${entity.entity} (click to remove)`;
    parts.push(mark);
    position = entity.end;
  });
  if (position < text.length) parts.push(document.createTextNode(text.slice(position)));
  box.replaceChildren(...parts);
}

function renderQueue() {
  $("queue").replaceChildren(...state.groups.slice(0, 30).map((g, i) => {
    const size = g.size || g.messages.length;
    const item = el("li", (size > 1 ? `[${size}] ` : "") + representative(g).text);
    if (i === state.index) item.className = "current";
    return item;
  }));
}

function offsetIn(box, node, offset) {
  const range = document.createRange();
  range.setStart(box, 0);
  range.setEnd(node, offset);
  return range.toString().length;
}

function onSelect() {
  const selection = window.getSelection();
  const box = $("text");
  if (!current() || !selection || selection.isCollapsed || selection.rangeCount === 0) return;
  const range = selection.getRangeAt(0);
  if (!box.contains(range.startContainer) || !box.contains(range.endContainer)) return;
  const text = representative(current()).text;
  let start = offsetIn(box, range.startContainer, range.startOffset);
  let end = offsetIn(box, range.endContainer, range.endOffset);
  while (start < end && /\s/.test(text[start])) start++;
  while (end > start && /\s/.test(text[end - 1])) end--;
  if (start >= end) return;
  state.selection = { start, end };
  $("selection").textContent = text.slice(start, end);
  $("entity-editor").hidden = false;
  $("entity-type").value = "";
  $("entity-type").focus();
}

function addEntity() {
  const type = $("entity-type").value.trim();
  const chosen = state.selection;
  if (!type || !chosen) return;
  const text = representative(current()).text;
  state.entities = state.entities.filter((e) => e.end <= chosen.start || e.start >= chosen.end);
  state.entities.push({ entity: type, start: chosen.start, end: chosen.end, value: text.slice(chosen.start, chosen.end) });
  state.edited = true;
  closeEditors();
  renderText();
  status(`entity ${type} marked`);
}

function removeEntity(index) {
  state.entities.splice(index, 1);
  state.edited = true;
  renderText();
}

function closeEditors() {
  $("entity-editor").hidden = true;
  $("new-intent-editor").hidden = true;
  state.selection = null;
  if (document.activeElement && document.activeElement.tagName === "INPUT" &&
      document.activeElement.id !== "reviewer") document.activeElement.blur();
}

async function decide(intent) {
  const group = current();
  if (!group || !intent || state.busy) return;
  state.busy = true;
  const message = representative(group);
  const body = { intent, reviewer: $("reviewer").value, messages: group.messages.map((m) => ({ id: m.id, version: m.version })) };
  if (state.edited) { body.entities = state.entities; body.entities_of = message.id; }
  try {
    const result = await api("/api/decide", body);
    state.undo.push({ group, messages: Object.entries(result.versions).map(([id, version]) => ({ id, version })) });
    state.groups.splice(state.index, 1);
    state.total -= 1;
    const left = result.left_out && result.left_out.length ? ` (${result.left_out.length} not writable to YAML)` : "";
    show();
    if (state.groups.length < 10) await loadInbox(current() && current().id);
    else await loadDone();
    await refreshState();
    status(`${group.messages.length} labelled ${intent}${left}`);
  } catch (error) {
    // a conflict: show the inbox as it is now, then say why (as on success, the status comes last)
    if (error.status === 409) await loadInbox().catch(() => {});
    status(error.message, true);
  } finally {
    state.busy = false;
  }
}

async function undo() {
  const last = state.undo.pop();
  if (!last) { status("nothing to undo"); return; }
  try {
    await api("/api/undo", { messages: last.messages, reviewer: $("reviewer").value });
    await loadInbox(last.group.id);
    await refreshState();
    status(`undone: ${last.group.messages.length} messages are open again`);
  } catch (error) {
    status(error.message, true);
  }
}

// Enter labels a group with the model's intent only when the server says it may (group.accept):
// never a guess the fallback caught or one below the fallback threshold (group.guard says which)
function guardText(group) {
  return `${group.guard}: Enter does not accept it. Pick its intent with a number, o (out of scope) ` +
    "or n (another or a new intent)";
}

function accept() {
  const group = current();
  if (!group) return;
  if (group.accept) decide(group.accept);
  else status(guardText(group), true);
}

function openNewIntent() {
  if (!current()) return;
  $("new-intent-editor").hidden = false;
  $("new-intent").value = "";
  $("new-intent").focus();
}

function move(step) {
  if (!state.groups.length) return;
  state.index = Math.max(0, Math.min(state.groups.length - 1, state.index + step));
  show();
}

function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const target = event.target;
  if (target.id === "entity-type" || target.id === "new-intent") {
    if (event.key === "Escape") { closeEditors(); event.preventDefault(); }
    if (event.key === "Enter") {
      event.preventDefault();
      if (target.id === "entity-type") addEntity();
      else { const name = $("new-intent").value.trim(); closeEditors(); decide(name); }
    }
    return;
  }
  if (target.tagName === "INPUT" || target.tagName === "TEXTAREA") return;
  const group = current();
  const message = group ? representative(group) : null;
  if ((event.key === "Enter" || event.key === "a") && message) accept();
  else if (/^[1-9]$/.test(event.key) && message) {
    const pick = message.ranking[Number(event.key) - 1];
    if (pick) decide(pick.name);
  } else if (event.key === "o") decide(state.outOfScope);
  else if (event.key === "n") openNewIntent();
  else if (event.key === "u") undo();
  else if (event.key === "j") move(1);
  else if (event.key === "k") move(-1);
  else return;
  event.preventDefault();
}

function showTraining(train) {
  const box = $("train-status");
  $("train").hidden = train === null;
  if (!train) { box.textContent = train === null ? "start the review with --model to train here" : ""; return; }
  const lines = [train.state];
  if (train.comparison) {
    for (const name of ["reviewed", "test"]) {
      const part = train.comparison[name];
      if (!part) continue;
      lines.push(`${name}: ${part.examples} messages, accuracy ${(100 * part.old_accuracy).toFixed(1)}% → ` +
        `${(100 * part.new_accuracy).toFixed(1)}%; fixes ${part.fixed}, breaks ${part.broken}`);
      part.broken_examples.slice(0, 5).forEach((b) => lines.push(`  breaks: ${b.text} (${b.intent} → ${b.new})`));
    }
    lines.push(`new model: ${train.model}`);
  } else if (train.log) lines.push(train.log);
  box.textContent = lines.join("\n");
  if (train.state === "running") setTimeout(() => api("/api/train").then(showTraining).catch(() => {}), 2000);
}

async function train() {
  try { showTraining(await api("/api/train", {})); } catch (error) { status(error.message, true); }
}

function start() {
  loadToken();
  $("reviewer").value = localStorage.getItem("review-reviewer") || "";
  $("reviewer").addEventListener("change", () => localStorage.setItem("review-reviewer", $("reviewer").value));
  document.addEventListener("keydown", onKey);
  $("text").addEventListener("mouseup", onSelect);
  $("text").addEventListener("keyup", onSelect);
  $("text").addEventListener("click", (event) => {
    const mark = event.target.closest ? event.target.closest("mark.entity") : null;
    if (mark && window.getSelection().isCollapsed) removeEntity(Number(mark.getAttribute("data-index")));
  });
  $("accept").addEventListener("click", accept);
  $("oos").addEventListener("click", () => decide(state.outOfScope));
  $("new").addEventListener("click", openNewIntent);
  $("undo").addEventListener("click", undo);
  $("next").addEventListener("click", () => move(1));
  $("prev").addEventListener("click", () => move(-1));
  $("train").addEventListener("click", train);
  refreshState().then(() => loadInbox()).catch((error) => status(error.message, true));
}

document.addEventListener("DOMContentLoaded", start);
