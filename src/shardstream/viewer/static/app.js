// shardstream view: the page's views (grid, table, statistics), filters and navigation. The state lives in the
// URL's hash, so the browser's back button and links restore a view (see writeHash/readHash). Helpers and the
// detail panel are in sample.js.
"use strict";

// each refresh() is one generation: an answer that comes back after a newer refresh began is dropped, so a
// slow answer to an older view (say, before a filter was typed) cannot overwrite the newer one
let generation = 0;
const stale = (mine) => mine !== generation;

function filterQuery() {
  const parts = [];
  for (const [name, value] of Object.entries(state.filters)) if (value) parts.push(`${name}=${enc(value)}`);
  return parts.join("&");
}

// -- the grid ---------------------------------------------------------------------------------------------

async function loadGrid(mine) {
  const query = `offset=${state.offset}&limit=${state.limit}&${filterQuery()}`;
  const page = await api(`/api/samples?${query}`);
  if (stale(mine)) return;
  state.total = page.total; state.offset = page.offset; state.items = page.items;
  $("grid").replaceChildren(...state.items.map(tile));
  if (!state.items.length) $("grid").append(el("p", { class: "muted", text: "no sample passes the filters" }));
  if (page.marks) document.body.dataset.marks = "1";
  if (page.scanning) {  // the server is still reading the dataset for the problem marks: ask again soon
    const asked = hashFor({ sample: null });
    setTimeout(() => { if (hashFor({ sample: null }) === asked && state.view === "grid") refresh(false); }, 1000);
  }
}

function tile(item) {
  const pic = el("div", { class: "pic" });
  if (item.thumb) {
    const img = el("img", { src: `/api/thumb/${item.index}?ext=${enc(item.thumb)}&v=${state.info.token}`,
                            alt: `${item.key}.${item.thumb}`, loading: "lazy" });
    img.addEventListener("error", () => pic.replaceChildren(noPicture(item)));
    pic.append(img);
  } else {
    pic.append(noPicture(item));
  }
  const meta = el("div", { class: "meta" },
    el("span", { class: "key", title: item.key, text: item.key }),
    el("span", { class: "muted", text: `#${item.index}` }));
  if (item.label !== undefined) {
    meta.append(" ", el("span", { class: "label", text: item.class_name ? `${item.class_name} (${item.label})` : `cls ${item.label}` }));
  }
  let title = `${item.key}: ${item.fields.join(", ")}`;
  if (item.problems.length) {
    meta.append(" ", el("span", { class: "badge", text: `⚠ ${item.problems.length}` }),
                el("span", { class: "problem", text: item.problems[0] }));
    title += "\n" + item.problems.join("\n");
  }
  const node = el("button", { class: "tile" + (item.problems.length ? " broken" : ""), type: "button",
                              "data-index": String(item.index), title }, pic, meta);
  node.addEventListener("click", () => openSample(item.index));
  return node;
}

function noPicture(item) {
  return el("div", { class: "nopic" }, el("div", { text: item.fields.map((f) => "." + f).join(" ") }),
            item.caption ? el("div", { text: item.caption }) : "");
}

// -- the table --------------------------------------------------------------------------------------------

async function loadTable(mine) {
  const query = `offset=${state.offset}&limit=${state.limit}&sort=${enc(state.sort)}&desc=${state.desc ? 1 : 0}&${filterQuery()}`;
  const t = await api(`/api/table?${query}`);
  if (stale(mine)) return;
  state.total = t.total; state.offset = t.offset;
  const head = el("tr", {}, ...t.columns.map((c) => {
    const arrow = c === t.sort ? (t.descending ? " ▼" : " ▲") : "";
    const th = el("th", { "data-column": c, title: `sort by ${c}`, text: c + arrow });
    th.addEventListener("click", () => {
      state.desc = state.sort === c ? !state.desc : false; state.sort = c; state.offset = 0; refresh();
    });
    return th;
  }));
  $("table").tHead.replaceChildren(head);
  $("table").tBodies[0].replaceChildren(...t.rows.map((row) => {
    const tr = el("tr", { "data-index": String(row[0]) },
                  ...row.map((v, k) => el("td", { class: typeof v === "number" ? "num" : "",
                                                  text: v === null ? "" : String(k === 2 ? human(v) : v) })));
    if (row[t.columns.indexOf("problems")]) tr.classList.add("broken");
    tr.addEventListener("click", () => openSample(row[0]));
    return tr;
  }));
  $("table-note").textContent = t.scanned < t.samples
    ? `the first ${t.scanned} of ${t.samples} samples (--scan-limit); click a row to open it` : "click a row to open it, a column to sort";
}

// -- statistics -------------------------------------------------------------------------------------------

function bars(rows) {
  // rows: [label, count, title]; horizontal bars scaled to the largest count
  const peak = Math.max(1, ...rows.map((r) => r[1]));
  return el("div", { class: "bars" }, ...rows.map(([label, count, title]) => {
    const bar = el("span", { class: "fill" });
    bar.style.width = `${(100 * count) / peak}%`;
    return el("div", { class: "row", title: title || `${label}: ${count}` },
              el("span", { class: "name", text: label }), el("span", { class: "track" }, bar),
              el("span", { class: "count", text: String(count) }));
  }));
}

async function loadStats(mine) {
  const s = await api("/api/stats");
  if (stale(mine)) return;
  const card = (title, ...content) => el("section", { class: "card" }, el("h3", { text: title }), ...content);
  const note = s.scanned < s.samples ? ` (the first ${s.scanned} of ${s.samples} samples)` : "";
  const labels = s.labels.map((l) => [l.name != null ? `${l.name} (${l.label})` : String(l.label), l.count]);
  if (s.unlabelled) labels.push(["no label", s.unlabelled]);
  const fields = el("table", { class: "fields" },
    el("tr", {}, ...["field", "in samples", "min", "median", "max", "sizes"].map((h) => el("th", { text: h }))),
    ...s.fields.map((f) => el("tr", { "data-ext": f.ext },
      el("td", { text: "." + f.ext }), el("td", { class: "num", text: `${f.present} of ${s.scanned}` }),
      el("td", { class: "num", text: human(f.min) }), el("td", { class: "num", text: human(f.median) }),
      el("td", { class: "num", text: human(f.max) }),
      el("td", {}, bars(f.histogram.map((h) => [`${human(h.from)}–${human(h.to)}`, h.count]))))));
  $("stats-view").replaceChildren(
    el("p", { class: "muted", text: `${s.samples} samples${note}; ${s.broken} with problems` }),
    el("div", { class: "cards" },
      card("labels", labels.length ? bars(labels) : el("p", { class: "muted", text: "no .cls or JSON label" })),
      card("image sizes", s.image_sizes.length ? bars(s.image_sizes.map((x) => [`${x.width}×${x.height}`, x.count]))
                                               : el("p", { class: "muted", text: "no images" })),
      card("problems", s.problems.length ? bars(s.problems.map((p) => [p.problem, p.count]))
                                         : el("p", { class: "muted", text: "none found" }))),
    card("fields: presence and sizes", fields));
}

// -- navigation: the state in the URL ---------------------------------------------------------------------

// true when this view is the one shown, false when a newer refresh began while it loaded
async function refresh(push = true) {
  say("");
  for (const view of ["grid", "table", "stats"]) $(`tab-${view}`).classList.toggle("active", state.view === view);
  $("grid").hidden = state.view !== "grid";
  $("table-view").hidden = state.view !== "table";
  $("stats-view").hidden = state.view !== "stats";
  const mine = ++generation;
  try {
    if (state.view === "grid") await loadGrid(mine);
    else if (state.view === "table") await loadTable(mine);
    else await loadStats(mine);
  } catch (e) { if (!stale(mine)) say(e.message); }
  if (stale(mine)) return false;  // a newer refresh shows its own view
  const paged = state.view !== "stats";
  const last = Math.min(state.total, state.offset + state.limit);
  $("range").textContent = !paged ? "" : state.total ? `${state.offset + 1}–${last} of ${state.total}` : "none";
  $("prev").disabled = !paged || state.offset <= 0;
  $("next").disabled = !paged || state.offset + state.limit >= state.total;
  if (state.sample) highlight(state.sample.index);
  writeHash(push);
  return true;
}

function hashFor(over) {
  const s = { view: state.view, offset: state.offset, limit: state.limit, sort: state.sort, desc: state.desc,
              sample: state.sample ? state.sample.index : null, ...over };
  const parts = [`view=${s.view}`, `offset=${s.offset}`, `limit=${s.limit}`];
  for (const [name, value] of Object.entries(state.filters)) if (value) parts.push(`${name}=${enc(value)}`);
  if (s.view === "table") parts.push(`sort=${enc(s.sort)}`, `desc=${s.desc ? 1 : 0}`);
  if (s.sample !== null) parts.push(`sample=${s.sample}`);
  return parts.join("&");
}

function writeHash(push) {
  // the tabs are links to the same state in another view (so they open in a new tab, too)
  for (const view of ["grid", "table", "stats"]) $(`tab-${view}`).href = "#" + hashFor({ view, offset: 0 });
  const hash = "#" + hashFor({});
  if (location.hash === hash) return;
  if (push) history.pushState(null, "", hash);
  else history.replaceState(null, "", hash);
}

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const number = (name, fallback) => (/^\d+$/.test(params.get(name) || "") ? Number(params.get(name)) : fallback);
  state.view = ["grid", "table", "stats"].includes(params.get("view")) ? params.get("view") : "grid";
  state.limit = [24, 48, 96, 192].includes(number("limit", 48)) ? number("limit", 48) : 48;
  state.offset = number("offset", 0);
  state.sort = params.get("sort") || "index";
  state.desc = params.get("desc") === "1";
  for (const name of Object.keys(state.filters)) state.filters[name] = params.get(name) || "";
  if (!state.info.extensions.includes(state.filters.ext)) state.filters.ext = "";
  showFilters();
  $("limit").value = String(state.limit);
  return number("sample", null);
}

async function restore(push) {
  const sample = readHash();
  if (!(await refresh(false))) return;  // a newer view (another restore, a filter) took over while this one loaded
  if (sample !== null && sample < state.info.samples) await openSample(sample, push);
  else closeSample(false);  // also drops a sample still loading
}

function setFilter(name, value) {
  state.filters[name] = value;
  state.offset = 0;
  refresh();
}

async function jump() {
  const text = $("jump").value.trim();
  if (!text) return;
  let index = null;
  try { index = (await api(`/api/find?key=${enc(text)}`)).index; } catch (e) { say(e.message); return; }
  if (index === null && /^\d+$/.test(text) && Number(text) < state.info.samples) index = Number(text);
  if (index === null) { say(`no sample with key or number ${JSON.stringify(text)}`); return; }
  if (state.view === "grid" && !filterQuery()) {
    state.offset = index - (index % state.limit);
    await refresh(false);
  }
  await openSample(index);
}

async function randomSample() {
  try { await openSample((await api(`/api/random?${filterQuery()}`)).index); } catch (e) { say(e.message); }
}

async function start() {
  try { state.info = await api("/api/info"); } catch (e) { say(e.message); return; }
  const info = state.info;
  const classes = info.classes ? `, ${info.classes.length} classes` : "";
  $("summary").textContent = `${info.samples} samples in ${info.shards.length} shard${info.shards.length === 1 ? "" : "s"}${classes}`;
  document.title = `shardstream view: ${info.inputs.join(" ")}`;
  for (const ext of info.extensions) $("ext").append(el("option", { value: ext, text: "." + ext }));
  (info.classes || []).forEach((name, k) => $("label").append(el("option", { value: String(k), text: `${name} (${k})` })));
  if (!info.classes) $("label").addEventListener("focus", labelsFromStats, { once: true });
  if (!info.classes && new URLSearchParams(location.hash.slice(1)).get("label")) await labelsFromStats();
  if (info.problems.length) {
    $("problems").textContent = "Problems met while opening the dataset:\n" + info.problems.join("\n");
    $("problems").hidden = false;
  }
  $("prev").addEventListener("click", () => { state.offset = Math.max(0, state.offset - state.limit); refresh(); });
  $("next").addEventListener("click", () => { state.offset += state.limit; refresh(); });
  $("limit").addEventListener("change", () => { state.limit = Number($("limit").value); state.offset = 0; refresh(); });
  for (const name of ["ext", "label"]) $(name).addEventListener("change", () => setFilter(name, $(name).value));
  for (const name of ["key", "where"]) {
    $(name).addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); setFilter(name, $(name).value.trim()); } });
    $(name).addEventListener("change", () => setFilter(name, $(name).value.trim()));
  }
  $("broken").addEventListener("change", () => setFilter("broken", $("broken").checked ? "1" : ""));
  $("clear").addEventListener("click", () => {
    for (const name of Object.keys(state.filters)) state.filters[name] = "";
    showFilters(); state.offset = 0; refresh();
  });
  $("filters").addEventListener("submit", (e) => e.preventDefault());
  $("go").addEventListener("click", jump);
  $("jump").addEventListener("keydown", (e) => { if (e.key === "Enter") jump(); });
  $("random").addEventListener("click", randomSample);
  $("detail-close").addEventListener("click", () => closeSample());
  $("detail-prev").addEventListener("click", () => state.sample && openSample(state.sample.index - 1));
  $("detail-next").addEventListener("click", () => state.sample && openSample(state.sample.index + 1));
  document.addEventListener("keydown", (e) => {
    if (["INPUT", "SELECT"].includes(e.target.tagName)) return;
    if (e.key === "Escape" && state.sample) closeSample();
    else if (e.key === "ArrowRight") state.sample ? $("detail-next").click() : $("next").click();
    else if (e.key === "ArrowLeft") state.sample ? $("detail-prev").click() : $("prev").click();
  });
  window.addEventListener("popstate", () => restore(false));
  await restore(false);
  document.body.dataset.ready = "1";
}

async function labelsFromStats() {
  // no classes.txt: the labels the dataset has (from the statistics, read once)
  try {
    const s = await api("/api/stats");
    $("label").replaceChildren(el("option", { value: "", text: "any" }),
                               ...s.labels.map((l) => el("option", { value: String(l.label), text: String(l.label) })));
    $("label").value = state.filters.label;
  } catch (e) { say(e.message); }
}

function showFilters() {
  for (const name of Object.keys(state.filters)) {
    const input = $(name);
    if (input.type === "checkbox") input.checked = !!state.filters[name]; else input.value = state.filters[name];
  }
}

start();
