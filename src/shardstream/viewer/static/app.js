// shardstream view: the page. Plain JS, no build. Every piece of data goes into the page through
// textContent or attributes set on elements: never through innerHTML (keys and fields may hold markup).
"use strict";

const state = { info: null, offset: 0, limit: 48, ext: "", total: 0, items: [], sample: null };
const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "class") node.className = value;
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) node.append(child);
  return node;
}

async function api(path) {
  const answer = await fetch(path, { headers: { Accept: "application/json" } });
  let body = null;
  try { body = await answer.json(); } catch (e) { body = { error: `${answer.status} ${answer.statusText}` }; }
  if (!answer.ok) throw new Error(body && body.error ? body.error : `${answer.status}`);
  return body;
}

const enc = encodeURIComponent;
const fieldUrl = (i, ext) => `/api/field/${i}/${enc(ext)}?v=${state.info.token}`;
const imageUrl = (i, ext, array) =>
  `/api/image/${i}/${enc(ext)}?v=${state.info.token}` + (array == null ? "" : `&array=${enc(array)}`);

function say(text) { $("message").textContent = text || ""; }

function human(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  while (n >= 1024 && u < units.length - 1) { n /= 1024; u++; }
  return u ? `${n.toFixed(1)} ${units[u]}` : `${n} B`;
}

// -- the grid ---------------------------------------------------------------------------------------------

async function loadPage() {
  say("");
  if (state.sample) closeSample();
  const query = `offset=${state.offset}&limit=${state.limit}` + (state.ext ? `&ext=${enc(state.ext)}` : "");
  try {
    const page = await api(`/api/samples?${query}`);
    state.total = page.total; state.offset = page.offset; state.items = page.items;
    renderGrid();
  } catch (e) { say(e.message); }
  writeHash();
}

function renderGrid() {
  const grid = $("grid");
  grid.replaceChildren(...state.items.map(tile));
  const last = Math.min(state.total, state.offset + state.items.length);
  $("range").textContent = state.total ? `${state.offset + 1}–${last} of ${state.total}` : "no samples";
  $("prev").disabled = state.offset <= 0;
  $("next").disabled = state.offset + state.limit >= state.total;
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
  const node = el("button", { class: "tile", type: "button", "data-index": String(item.index),
                              title: `${item.key}: ${item.fields.join(", ")}` }, pic, meta);
  node.addEventListener("click", () => openSample(item.index));
  return node;
}

function noPicture(item) {
  return el("div", { class: "nopic" }, el("div", { text: item.fields.map((f) => "." + f).join(" ") }),
            item.caption ? el("div", { text: item.caption }) : "");
}

function goPage(offset) {
  state.offset = Math.max(0, Math.min(offset, Math.max(0, state.total - 1)));
  state.offset -= state.offset % state.limit;
  return loadPage();
}

// -- one sample -------------------------------------------------------------------------------------------

async function openSample(i) {
  say("");
  try {
    state.sample = await api(`/api/sample/${i}`);
  } catch (e) { say(e.message); return; }
  const s = state.sample;
  $("detail-title").textContent = `#${s.index}  ${s.key}`;
  $("detail-shard").textContent = `shard ${s.shard}`;
  $("fields").replaceChildren(...s.fields.map((f) => fieldView(s.index, f)));
  $("detail-prev").disabled = s.index <= 0;
  $("detail-next").disabled = s.index + 1 >= state.info.samples;
  $("detail").hidden = false;
  $("grid").hidden = true;
  window.scrollTo(0, 0);
  writeHash();
}

function closeSample() {
  $("detail").hidden = true;
  $("grid").hidden = false;
  state.sample = null;
  writeHash();
}

function fieldView(i, f) {
  const info = [human(f.size), f.kind];
  if (f.kind === "image") info.push(`${f.width}×${f.height} ${f.mode} ${f.format || ""}`);
  const body = el("div", { class: "body" });
  const box = el("section", { class: `field kind-${f.kind}`, "data-ext": f.ext },
    el("h3", {}, el("span", { class: "ext", text: "." + f.ext }), el("span", { class: "info", text: info.join(" · ") })),
    body);
  if (f.note) body.append(el("p", { class: "note", text: f.note }));
  switch (f.kind) {
    case "image": {
      const img = el("img", { src: f.native ? fieldUrl(i, f.ext) : imageUrl(i, f.ext), alt: "." + f.ext });
      if (f.width > 256 || f.height > 256) img.classList.add("large");
      if (f.width && f.width < 128) img.style.width = `${Math.min(256, f.width * 4)}px`;  // tiny: magnified
      body.append(el("a", { href: img.src, target: "_blank", rel: "noopener", title: "open the image alone" }, img));
      break;
    }
    case "audio": case "video":
      body.append(el(f.kind, { controls: "", preload: "metadata", src: fieldUrl(i, f.ext) }));
      break;
    case "text": case "json":
      body.append(el("pre", { text: f.text }));
      if (f.truncated) body.append(el("p", { class: "note", text: "(truncated)" }));
      break;
    case "label":
      body.append(el("span", { class: "label-value", text: String(f.value) }));
      if (f.name != null) body.append(el("span", { class: "label-name", text: f.name }));
      break;
    case "array":
      for (const a of f.arrays) {
        const part = el("div", { class: "array" },
          el("p", { class: "shape", text: `${a.name == null ? "" : a.name + ": "}shape (${a.shape.join(", ")}${a.shape.length === 1 ? "," : ""}) dtype ${a.dtype}` }),
        );
        if (a.image) {
          const img = el("img", { src: imageUrl(i, f.ext, a.name), alt: `${f.ext} ${a.name || ""}` });
          if (Math.max(...a.shape.slice(0, 2)) < 128) img.style.width = "256px";
          part.append(el("div", {}, img));
        }
        part.append(el("pre", { text: a.preview }));
        body.append(part);
      }
      break;
    case "error":
      body.append(el("p", { class: "error", text: `does not decode: ${f.error}` }), el("pre", { text: f.hex }));
      break;
    default: // unsafe, binary
      body.append(el("pre", { text: f.hex }));
  }
  return box;
}

// -- navigation -------------------------------------------------------------------------------------------

async function jump() {
  const text = $("jump").value.trim();
  if (!text) return;
  let index = null;
  try {
    index = (await api(`/api/find?key=${enc(text)}`)).index;
  } catch (e) { say(e.message); return; }
  if (index === null && /^\d+$/.test(text) && Number(text) < state.info.samples) index = Number(text);
  if (index === null) { say(`no sample with key or number ${JSON.stringify(text)}`); return; }
  if (state.ext) { state.ext = ""; $("ext").value = ""; }
  await goPage(index);
  highlight(index);
  await openSample(index);
}

function highlight(index) {
  for (const node of document.querySelectorAll(".tile.current")) node.classList.remove("current");
  const node = document.querySelector(`.tile[data-index="${index}"]`);
  if (node) node.classList.add("current");
}

async function randomSample() {
  try {
    const { index } = await api(`/api/random${state.ext ? `?ext=${enc(state.ext)}` : ""}`);
    await openSample(index);
  } catch (e) { say(e.message); }
}

function writeHash() {
  const parts = [`offset=${state.offset}`, `limit=${state.limit}`];
  if (state.ext) parts.push(`ext=${enc(state.ext)}`);
  if (state.sample) parts.push(`sample=${state.sample.index}`);
  const hash = "#" + parts.join("&");
  if (location.hash !== hash) history.replaceState(null, "", hash);
}

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  const number = (name, fallback) => (/^\d+$/.test(params.get(name) || "") ? Number(params.get(name)) : fallback);
  state.limit = [24, 48, 96, 192].includes(number("limit", 48)) ? number("limit", 48) : 48;
  state.offset = number("offset", 0);
  const ext = params.get("ext") || "";
  state.ext = state.info.extensions.includes(ext) ? ext : "";
  return number("sample", null);
}

async function start() {
  try {
    state.info = await api("/api/info");
  } catch (e) { say(e.message); return; }
  const info = state.info;
  const classes = info.classes ? `, ${info.classes.length} classes` : "";
  $("summary").textContent = `${info.samples} samples in ${info.shards.length} shard${info.shards.length === 1 ? "" : "s"}${classes}`;
  document.title = `shardstream view: ${info.inputs.join(" ")}`;
  for (const ext of info.extensions) $("ext").append(el("option", { value: ext, text: "." + ext }));
  if (info.problems.length) {
    $("problems").textContent = "Problems met while opening the dataset:\n" + info.problems.join("\n");
    $("problems").hidden = false;
  }
  state.total = info.samples;
  const sample = readHash();
  $("limit").value = String(state.limit);
  $("ext").value = state.ext;
  $("prev").addEventListener("click", () => goPage(state.offset - state.limit));
  $("next").addEventListener("click", () => goPage(state.offset + state.limit));
  $("limit").addEventListener("change", () => { state.limit = Number($("limit").value); goPage(state.offset); });
  $("ext").addEventListener("change", () => { state.ext = $("ext").value; goPage(0); });
  $("go").addEventListener("click", jump);
  $("jump").addEventListener("keydown", (e) => { if (e.key === "Enter") jump(); });
  $("random").addEventListener("click", randomSample);
  $("detail-close").addEventListener("click", closeSample);
  $("detail-prev").addEventListener("click", () => state.sample && openSample(state.sample.index - 1));
  $("detail-next").addEventListener("click", () => state.sample && openSample(state.sample.index + 1));
  document.addEventListener("keydown", (e) => {
    if (e.target.tagName === "INPUT" || e.target.tagName === "SELECT") return;
    if (e.key === "Escape" && state.sample) closeSample();
    else if (e.key === "ArrowRight") state.sample ? $("detail-next").click() : $("next").click();
    else if (e.key === "ArrowLeft") state.sample ? $("detail-prev").click() : $("prev").click();
  });
  await goPage(state.offset);
  if (sample !== null && sample < info.samples) await openSample(sample);
  document.body.dataset.ready = "1";
}

start();
