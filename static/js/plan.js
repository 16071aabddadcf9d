// A plan, drawn: each machine's predicted memory by kind against what it may use, and where the layers sit.
const plan = JSON.parse(document.getElementById("plan-data").textContent);
const MiB = 2 ** 20;
const used = plan.stages.filter((s) => s.count > 0 || s.machine === "head");
const names = used.map((s) => s.machine);
const kinds = [["weights", "weights"], ["kv_cache", "KV cache"], ["compute", "compute buffer"], ["overhead", "runtime"]];
Plotly.newPlot("plan-memory", [
  ...kinds.map(([key, label]) => ({ type: "bar", name: label, x: names, y: used.map((s) => s.memory[key] / MiB) })),
  // The head's marker only when it holds layers: its whole free RAM would flatten every other bar.
  { type: "scatter", mode: "markers", name: "usable", x: names,
    y: used.map((s) => (s.machine === "head" && s.count === 0 ? null : s.usable / MiB)),
    marker: { symbol: "line-ew-open", size: 40, line: { width: 3 } } },
], { barmode: "stack", title: { text: "Predicted memory per machine", font: { size: 14 } }, height: 320,
  yaxis: { title: "MiB" }, margin: { t: 36, r: 16, b: 40, l: 56 } }, { displaylogo: false, responsive: true });
Plotly.newPlot("plan-layers", used.filter((s) => s.count > 0).map((s) => ({
  type: "bar", orientation: "h", name: s.machine, y: ["layers"], x: [s.count], base: [s.first],
  hovertemplate: `${s.machine}: layers ${s.first}–${s.first + s.count - 1}<extra></extra>`,
})), { barmode: "overlay", title: { text: "Which layers sit where", font: { size: 14 } }, height: 200,
  xaxis: { title: "layer" }, margin: { t: 36, r: 16, b: 40, l: 56 } }, { displaylogo: false, responsive: true });
