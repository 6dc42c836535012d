// The status page: reads the daemon's JSON endpoints every few seconds and draws what they say.
// No framework and no build step; every number shown keeps its raw value in data-value, so a test
// (or a curious operator) can compare it with the endpoint it came from.
"use strict";

const REFRESH_MS = 5000;
const SVG_NS = "http://www.w3.org/2000/svg";
const CHART = { width: 640, height: 240, left: 56, right: 12, top: 18, bottom: 30 };

// ---------------------------------------------------------------- formatting

function fmtInt(n) {
  return Number(n).toLocaleString("en-US");
}

function fmtBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let v = Number(n);
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${v.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

function fmtSeconds(s) {
  if (s === null || s === undefined || !Number.isFinite(s)) return "unknown";
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 2 : 0)} ms`;
  if (s < 120) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function fmtTick(s) {
  return s >= 1 ? `${fmtInt(s)} s` : `${s} s`;
}

function fmtTTL(s) {
  if (s < 0) return "unknown";
  const days = Math.floor(s / 86400);
  const hours = Math.floor((s % 86400) / 3600);
  if (days > 0) return `${fmtInt(days)} d ${hours} h`;
  const minutes = Math.floor((s % 3600) / 60);
  return hours > 0 ? `${hours} h ${minutes} min` : `${minutes} min`;
}

function fmtShare(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "n/a";
  return `${(x * 100).toFixed(x < 0.001 ? 4 : x < 0.1 ? 2 : 1)} %`;
}

// ---------------------------------------------------------------- DOM helpers

function field(name, text, value) {
  for (const el of document.querySelectorAll(`[data-field="${name}"]`)) {
    el.textContent = text;
    if (value !== undefined && value !== null) el.dataset.value = String(value);
    else delete el.dataset.value;
  }
}

function badge(id, label, ok) {
  const el = document.getElementById(id);
  el.textContent = label;
  el.dataset.state = ok ? "ok" : "bad";
}

function svgEl(name, attrs, text) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  if (text !== undefined) el.textContent = text;
  return el;
}

function titled(el, text) {
  el.appendChild(svgEl("title", {}, text));
  return el;
}

function clear(svg) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
}

// ---------------------------------------------------------------- charts

function drawBins(bins, radius) {
  const svg = document.getElementById("bins-chart");
  clear(svg);
  const { width, height, left, right, top, bottom } = CHART;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  if (!bins) {
    svg.appendChild(svgEl("text", { x: width / 2, y: height / 2, "text-anchor": "middle", class: "empty" }, "no reserve"));
    return;
  }
  const max = Math.max(1, ...bins);
  const step = plotW / bins.length;
  svg.appendChild(svgEl("line", { x1: left, y1: top + plotH, x2: left + plotW, y2: top + plotH, class: "axis" }));
  for (const frac of [0, 0.5, 1]) {
    const y = top + plotH - frac * plotH;
    svg.appendChild(svgEl("text", { x: left - 6, y: y + 4, "text-anchor": "end" }, fmtInt(Math.round(max * frac))));
  }
  bins.forEach((count, bin) => {
    const h = (count / max) * plotH;
    const bar = svgEl("rect", {
      x: left + bin * step + 1, y: top + plotH - h, width: Math.max(1, step - 2), height: h,
      class: bin < radius ? "bar below" : "bar", "data-bin": bin, "data-value": count,
    });
    svg.appendChild(titled(bar, `bin ${bin}: ${fmtInt(count)} entries`));
    if (bin % 4 === 0) {
      svg.appendChild(svgEl("text", { x: left + (bin + 0.5) * step, y: height - 12, "text-anchor": "middle" }, String(bin)));
    }
  });
  const rx = left + radius * step;
  svg.appendChild(svgEl("line", { x1: rx, y1: top, x2: rx, y2: top + plotH, class: "radius" }));
  svg.appendChild(svgEl("text", { x: rx + 3, y: top - 3 }, `storage radius ${radius}`));
  svg.appendChild(svgEl("text", { x: left + plotW / 2, y: height - 1, "text-anchor": "middle" }, "proximity bin"));
}

function drawSamples(samples) {
  const svg = document.getElementById("samples-chart");
  clear(svg);
  const { width, height, left, right, top, bottom } = CHART;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const runs = samples.recent || [];
  const windowS = samples.windowSeconds;
  const estimate = samples.fullReserveEstimateSeconds;
  const durations = runs.map((r) => Math.max(r.durationSeconds, 1e-4));
  // A log scale: samples of a small reserve take milliseconds, the window is minutes.
  const lo = Math.pow(10, Math.floor(Math.log10(Math.min(0.01, ...durations))));
  const hi = Math.pow(10, Math.ceil(Math.log10(Math.max(windowS * 1.2, estimate || 0, ...durations))));
  const y = (s) => top + plotH - ((Math.log10(Math.max(s, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * plotH;
  for (let d = lo; d <= hi * 1.0001; d *= 10) {
    svg.appendChild(svgEl("line", { x1: left, y1: y(d), x2: left + plotW, y2: y(d), class: "axis" }));
    svg.appendChild(svgEl("text", { x: left - 6, y: y(d) + 4, "text-anchor": "end" }, fmtTick(Number(d.toPrecision(1)))));
  }
  const slots = Math.max(runs.length, 12);
  const step = plotW / slots;
  runs.forEach((run, i) => {
    const top_ = y(Math.max(run.durationSeconds, lo));
    const bar = svgEl("rect", {
      x: left + i * step + 2, y: top_, width: Math.max(2, step - 4), height: top + plotH - top_,
      class: run.ok ? "bar" : "bar failed", "data-value": run.durationSeconds,
    });
    const when = new Date(run.finishedAt * 1000).toLocaleTimeString("en-GB");
    svg.appendChild(titled(bar, `${when}: ${fmtSeconds(run.durationSeconds)} (${fmtShare(run.durationSeconds / windowS)} of the window), ` +
      `${fmtInt(run.chunksIterated)} chunks${run.ok ? "" : ", failed"}`));
  });
  // each line's label at its own place along the line, so lines close together stay readable
  const lines = [
    [windowS, "limit", `window ${fmtSeconds(windowS)}`, left + plotW - 4, "end"],
    [windowS / 2, "half", "half the window", left + 4, "start"],
  ];
  if (estimate !== null && estimate !== undefined) {
    lines.push([estimate, "estimate", `a full 2^22-chunk sample: ${fmtSeconds(estimate)}`, left + plotW / 2, "middle"]);
  }
  for (const [value, cls, label, x, anchor] of lines) {
    svg.appendChild(svgEl("line", { x1: left, y1: y(value), x2: left + plotW, y2: y(value), class: cls }));
    svg.appendChild(svgEl("text", { x, y: y(value) - 4, "text-anchor": anchor, class: `${cls}-label` }, label));
  }
  if (runs.length === 0) {
    svg.appendChild(svgEl("text", { x: left + plotW / 2, y: top + plotH / 2, "text-anchor": "middle", class: "empty" },
      "no sample yet: GET /rchash/{depth}/{anchor1}/{anchor2} runs one"));
  }
  svg.appendChild(svgEl("text", { x: left + plotW / 2, y: height - 4, "text-anchor": "middle" },
    `last ${runs.length} sample${runs.length === 1 ? "" : "s"}, oldest first`));
}

// ---------------------------------------------------------------- the page

function renderBatches(batches, entries, reserveSize) {
  const body = document.querySelector("#batches tbody");
  const rows = [];
  for (const b of batches) {
    const n = entries[b.batchID];
    const tr = document.createElement("tr");
    tr.dataset.batch = b.batchID;
    const cells = [
      [b.batchID.slice(0, 12) + "…", b.batchID, false],
      [String(b.depth), b.depth, true],
      [String(b.bucketDepth), b.bucketDepth, true],
      [b.immutable ? "yes" : "no", b.immutable, false],
      [b.value, b.value, true],
      [fmtTTL(b.batchTTL), b.batchTTL, true],
      [n === undefined ? "…" : fmtInt(n), n, true],
      [n === undefined ? "…" : fmtShare(reserveSize > 0 ? n / reserveSize : 0), n === undefined ? null : (reserveSize > 0 ? n / reserveSize : 0), true],
    ];
    const names = ["batchID", "depth", "bucketDepth", "immutable", "value", "batchTTL", "entries", "share"];
    cells.forEach(([text, value, numeric], i) => {
      const td = document.createElement("td");
      td.textContent = text;
      td.dataset.col = names[i];
      if (value !== undefined && value !== null) td.dataset.value = String(value);
      if (numeric) td.className = "num";
      if (i === 0) td.title = b.batchID;
      tr.appendChild(td);
    });
    rows.push(tr);
  }
  if (rows.length === 0) {
    const tr = document.createElement("tr");
    const td = document.createElement("td");
    td.colSpan = 8;
    td.className = "muted";
    td.textContent = "no batches registered (POST /batches)";
    tr.appendChild(td);
    rows.push(tr);
  }
  body.replaceChildren(...rows);
}

function render(health, readiness, status, reserveState, batches, own) {
  badge("health", `health ${health.body.status}`, health.status === 200 && health.body.status === "ok");
  const ready = readiness.status === 200 && readiness.body.status === "ready";
  badge("readiness", readiness.body.status, ready);
  // why not ready (a demo fill, writes refused for a full disk, ...), when the daemon says
  const reason = document.getElementById("readiness-reason");
  reason.textContent = ready ? "" : readiness.body.reason || "";
  reason.hidden = ready || !readiness.body.reason;
  field("version", health.body.version, health.body.version);

  const s = status.body;
  field("overlay", s.overlay, s.overlay);
  field("storageRadius", String(s.storageRadius), s.storageRadius);
  field("committedDepth", String(s.committedDepth), s.committedDepth);
  const rs = reserveState.body;
  field("batchRadius", String(rs.radius), rs.radius);
  field("commitment", fmtInt(rs.commitment), rs.commitment);
  field("capacityDoubling", String(rs.reserveCapacityDoubling), rs.reserveCapacityDoubling);
  field("reserveSize", fmtInt(s.reserveSize), s.reserveSize);
  field("reserveSizeWithinRadius", fmtInt(s.reserveSizeWithinRadius), s.reserveSizeWithinRadius);

  const capacity = own.body.reserve.capacity;
  const share = capacity > 0 ? s.reserveSize / capacity : null;
  field("capacity", fmtInt(capacity), capacity);
  field("reserveShare", fmtShare(share), share);
  document.getElementById("reserve-meter").value = Math.min(1, share || 0);

  const backend = own.body.hashBackend;
  if (backend) {
    field("hashBackend", backend.name, backend.name);
    field("hashBackendNote", backend.accelerated ? "accelerated" : `not accelerated${backend.reason ? ": " + backend.reason : ""}`,
      backend.accelerated);
  } else {
    field("hashBackend", "unknown", null);
    field("hashBackendNote", "this daemon does not report its hash backend", null);
  }

  const disk = own.body.disk;
  field("dataDirBytes", fmtBytes(disk.dataDirBytes), disk.dataDirBytes);
  field("freeBytes", fmtBytes(disk.freeBytes), disk.freeBytes);
  field("sizeBytes", fmtBytes(disk.sizeBytes), disk.sizeBytes);
  document.getElementById("disk-meter").value = disk.sizeBytes > 0 ? 1 - disk.freeBytes / disk.sizeBytes : 0;

  const samples = own.body.samples;
  const last = samples.recent.length ? samples.recent[samples.recent.length - 1] : null;
  field("windowSeconds", fmtSeconds(samples.windowSeconds), samples.windowSeconds);
  field("lastSampleDuration", last ? fmtSeconds(last.durationSeconds) + (last.ok ? "" : " (failed)") : "none yet",
    last ? last.durationSeconds : null);
  field("lastSampleShare", last ? fmtShare(last.durationSeconds / samples.windowSeconds) : "n/a",
    last ? last.durationSeconds / samples.windowSeconds : null);
  field("fullReserveEstimate", fmtSeconds(samples.fullReserveEstimateSeconds), samples.fullReserveEstimateSeconds);

  drawBins(own.body.reserve.bins, s.storageRadius);
  drawSamples(samples);
  renderBatches(batches.body.batches, own.body.batches.entries, s.reserveSize);
  field("batchesCountedAt", new Date(own.body.batches.countedAt * 1000).toLocaleTimeString("en-GB"), own.body.batches.countedAt);
}

async function getJSON(path) {
  const r = await fetch(path, { cache: "no-store", headers: { Accept: "application/json" } });
  let body;
  try {
    body = await r.json();
  } catch (e) {
    throw new Error(`${path}: answered ${r.status} without JSON`);
  }
  // /readiness answers 400 with a JSON body while not ready: that is news, not an error
  if (!r.ok && path !== "/readiness") throw new Error(`${path}: ${r.status} ${body.message || ""}`);
  return { status: r.status, body };
}

async function refresh() {
  const error = document.getElementById("error");
  try {
    const answers = await Promise.all(
      ["/health", "/readiness", "/status", "/reservestate", "/batches", "/chunkstore/status"].map(getJSON),
    );
    render(...answers);
    error.hidden = true;
    const updated = document.getElementById("updated");
    updated.dataset.refreshes = String(Number(updated.dataset.refreshes) + 1);
    updated.textContent = `updated ${new Date().toLocaleTimeString("en-GB")}, every ${REFRESH_MS / 1000} s`;
  } catch (e) {
    // shown on the page: the operator is looking at it, not at the console
    error.textContent = `refresh failed: ${e.message}; retrying in ${REFRESH_MS / 1000} s`;
    error.hidden = false;
  } finally {
    setTimeout(refresh, REFRESH_MS);
  }
}

refresh();
