// The console's only script (no framework, nothing fetched from elsewhere): pages with
// data-refresh-ms reload themselves unless "pause refresh" is ticked, and the Charts page draws
// /api/series as line charts on its canvases.
"use strict";

(function () {
  const PAUSED = "rocketstore-console-paused";

  function autoRefresh() {
    const ms = Number(document.body.dataset.refreshMs || 0);
    const pause = document.getElementById("pause-refresh");
    if (pause) {
      pause.checked = localStorage.getItem(PAUSED) === "1";
      pause.addEventListener("change", () => localStorage.setItem(PAUSED, pause.checked ? "1" : "0"));
    }
    if (ms > 0) {
      setTimeout(() => { if (!(pause && pause.checked)) location.reload(); else autoRefresh(); }, Math.max(ms, 1000));
    }
  }

  const COLOURS = ["#1f5fbf", "#b42318", "#1a7f37", "#b54708", "#6941c6", "#0e7090", "#c11574", "#4e5ba6"];

  function draw(canvas, lines, nowMs, windowMs) {
    const ctx = canvas.getContext("2d");
    const w = canvas.width, h = canvas.height, left = 56, right = 8, top = 8, bottom = 40;
    ctx.clearRect(0, 0, w, h);
    let max = 0;
    for (const line of lines) for (const [, v] of line.points) max = Math.max(max, v);
    max = max > 0 ? max * 1.1 : 1;
    const x = (t) => left + (w - left - right) * (t - (nowMs - windowMs)) / windowMs;
    const y = (v) => top + (h - top - bottom) * (1 - v / max);
    ctx.strokeStyle = "#d9dee7"; ctx.fillStyle = "#667085"; ctx.font = "11px sans-serif"; ctx.lineWidth = 1;
    for (let i = 0; i <= 4; i++) {
      const v = max * i / 4;
      ctx.beginPath(); ctx.moveTo(left, y(v)); ctx.lineTo(w - right, y(v)); ctx.stroke();
      ctx.fillText(v >= 100 ? v.toFixed(0) : v.toFixed(1), 4, y(v) + 4);
    }
    const minutes = Math.round(windowMs / 60000);
    ctx.fillText("-" + minutes + " min", left, h - bottom + 14);
    ctx.fillText("now", w - right - 22, h - bottom + 14);
    lines.forEach((line, i) => {
      const colour = COLOURS[i % COLOURS.length];
      ctx.strokeStyle = colour; ctx.lineWidth = 2; ctx.beginPath();
      line.points.forEach(([t, v], j) => (j ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v))));
      ctx.stroke();
      ctx.fillStyle = colour;
      ctx.fillText(line.name, left + 8 + (i % 4) * 130, h - 6 - Math.floor(i / 4) * 12);
    });
    if (!lines.some((l) => l.points.length)) { ctx.fillStyle = "#667085"; ctx.fillText("no data yet", w / 2 - 30, h / 2); }
  }

  async function charts(box) {
    try {
      const answer = await fetch(box.dataset.seriesUrl, { credentials: "same-origin" });
      if (answer.ok) {
        const data = await answer.json();
        for (const canvas of box.querySelectorAll("canvas")) {
          const which = canvas.dataset.series;
          const lines = which === "lag"
            ? data.lags.map((l) => ({ name: l.name, points: l.bytes }))
            : data.brokers.map((b) => ({ name: b.name, points: b[which] }));
          draw(canvas, lines, data.now_ms || Date.now(), data.window_ms);
        }
        box.dataset.drawn = String(Date.now());
      }
    } finally {
      setTimeout(() => charts(box), Number(box.dataset.refreshMs || 5000));
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    autoRefresh();
    const box = document.querySelector(".charts[data-series-url]");
    if (box) charts(box);
  });
})();
