// shardstream view: one sample (the detail panel) and the helpers the page shares. Plain JS, no build. Every
// piece of data goes into the page through textContent or attributes set on elements, never through innerHTML
// (keys and fields may hold markup).
"use strict";

const state = { info: null, view: "grid", offset: 0, limit: 48, total: 0, items: [], sample: null,
                filters: { ext: "", label: "", key: "", where: "", broken: "" }, sort: "index", desc: false };
const $ = (id) => document.getElementById(id);
const enc = encodeURIComponent;
const SVG = "http://www.w3.org/2000/svg";

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

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  return node;
}

async function api(path) {
  const answer = await fetch(path, { headers: { Accept: "application/json" } });
  let body = null;
  try { body = await answer.json(); } catch (e) { body = { error: `${answer.status} ${answer.statusText}` }; }
  if (!answer.ok) throw new Error(body && body.error ? body.error : `${answer.status}`);
  return body;
}

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

function num(x) {
  if (x === null || x === undefined) return "–";
  return Math.abs(x) >= 1e4 || (Math.abs(x) < 1e-3 && x !== 0) ? x.toExponential(3) : String(+x.toFixed(4));
}

// -- one sample -------------------------------------------------------------------------------------------

// The latest open or close of the sample panel wins: an open whose answer comes after a newer open or close (the
// back button pressed again while it loaded) shows nothing.
let sampleGeneration = 0;

async function openSample(i, push = true) {
  say("");
  const mine = ++sampleGeneration;
  let s;
  try { s = await api(`/api/sample/${i}`); } catch (e) { if (mine === sampleGeneration) say(e.message); return; }
  if (mine !== sampleGeneration) return;
  state.sample = s;
  $("detail-title").textContent = `#${s.index}  ${s.key}`;
  $("detail-shard").textContent = `shard ${s.shard}`;
  const problems = $("detail-problems");
  problems.replaceChildren(...s.problems.map((p) => el("li", { text: p })));
  problems.hidden = !s.problems.length;
  // pictures and labels first: they are what one looks at; then text, JSON, arrays, the rest (each by name)
  const rank = { image: 0, video: 1, audio: 2, label: 3, error: 4, text: 5, json: 6, array: 7 };
  const fields = [...s.fields].sort((a, b) => (rank[a.kind] ?? 9) - (rank[b.kind] ?? 9));
  $("fields").replaceChildren(...fields.map((f) => fieldView(s.index, f, s.overlay)));
  $("detail-prev").disabled = s.index <= 0;
  $("detail-next").disabled = s.index + 1 >= state.info.samples;
  $("detail").hidden = false;
  document.body.classList.add("with-detail");
  highlight(s.index);
  $("transformed").hidden = true;
  $("detail-body").classList.toggle("split", s.transformed);
  if (s.transformed) showTransformed(s.index);
  writeHash(push);
}

function closeSample(push = true) {
  ++sampleGeneration;
  $("detail").hidden = true;
  document.body.classList.remove("with-detail");
  state.sample = null;
  highlight(null);
  writeHash(push);
}

function highlight(index) {
  for (const node of document.querySelectorAll(".current")) node.classList.remove("current");
  if (index === null) return;
  for (const node of document.querySelectorAll(`[data-index="${index}"]`)) node.classList.add("current");
}

function overlayFor(img, overlay) {
  // boxes and points from the sample's JSON, in the image's pixels: an SVG over the image, same box
  const layer = svg("svg", { class: "overlay", viewBox: `0 0 ${overlay.width} ${overlay.height}`,
                             preserveAspectRatio: "none" });
  const stroke = Math.max(1, Math.round(Math.max(overlay.width, overlay.height) / 150));
  for (const b of overlay.boxes) {
    layer.append(svg("rect", { x: b.x, y: b.y, width: b.w, height: b.h, class: "box", "stroke-width": stroke }));
    if (b.label != null) {
      const t = svg("text", { x: b.x + stroke, y: Math.max(b.y - stroke, stroke * 8), class: "box-label",
                              "font-size": stroke * 8 });
      t.textContent = b.label;
      layer.append(t);
    }
  }
  for (const p of overlay.points) layer.append(svg("circle", { cx: p.x, cy: p.y, r: stroke * 2, class: "point" }));
  return el("div", { class: "overlaid" }, img, layer);
}

function fieldView(i, f, overlay) {
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
      const shown = overlay && overlay.ext === f.ext ? overlayFor(img, overlay) : img;
      body.append(el("a", { href: img.src, target: "_blank", rel: "noopener", title: "open the image alone" }, shown));
      if (overlay && overlay.ext === f.ext) {
        body.append(el("p", { class: "note", text: `${overlay.boxes.length} boxes, ${overlay.points.length} points from .json` }));
      }
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

// -- what the pipeline makes of it (--decode / --transform) ------------------------------------------------

async function showTransformed(i) {
  const box = $("transformed");
  let t;
  try { t = await api(`/api/transformed/${i}`); } catch (e) { t = { spec: "", error: e.message, parts: [] }; }
  if (!state.sample || state.sample.index !== i) return;  // another sample was opened meanwhile
  const head = el("h3", {}, el("span", { text: "pipeline output" }), el("span", { class: "info", text: t.spec }));
  head.title = t.spec;
  const parts = t.parts.map((p) => partView(i, p));
  if (t.error) parts.unshift(el("p", { class: "error", text: `the transform failed: ${t.error}` }));
  box.replaceChildren(head, ...parts);
  box.hidden = false;
}

function partView(i, p) {
  const node = el("div", { class: `part kind-${p.kind}`, "data-part": p.name });
  if (p.kind === "text") {
    node.append(el("p", { class: "shape", text: `${p.name}: ${p.type}` }), el("pre", { text: p.text }));
    return node;
  }
  node.append(el("p", { class: "shape", text: `${p.name}: ${p.type} shape (${p.shape.join(", ")}) ${p.dtype}` }));
  node.append(el("p", { class: "range", text: `range [${num(p.min)}, ${num(p.max)}]  mean ${num(p.mean)}  std ${num(p.std)}`
                                        + (p.nonfinite ? `  ${p.nonfinite} NaN/inf` : "") }));
  if (p.image || p.heatmap) {
    const url = `/api/transformed/${i}/${enc(p.name)}?v=${state.info.token}` + (p.heatmap ? "&heatmap=1" : "");
    const img = el("img", { src: url, alt: p.name, class: p.heatmap ? "heatmap" : "tensor" });
    if (Math.max(...p.shape) < 128) img.style.width = "100%";
    node.append(img, el("p", { class: "note", text: p.heatmap ? "heat map: min dark blue, max yellow"
                                                               : "image, stretched from min to max" }));
  }
  return node;
}
