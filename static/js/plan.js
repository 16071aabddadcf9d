// Plans, drawn: each machine's predicted memory by kind against what it may use, and where the layers sit;
// one pair of charts per plan (the plan page draws every mode that fits, a deployment its own).
import { CONFIG, layout } from "./charts.js";

const MiB = 2 ** 20;
const KINDS = [["weights", "weights"], ["kv_cache", "KV cache"], ["compute", "compute buffer"], ["overhead", "runtime"]];
const root = document.getElementById("plan-charts");

function draw({ title, plan }, index) {
  const used = plan.stages.filter((s) => s.count > 0 || s.machine === "head");
  const names = used.map((s) => s.machine);
  const box = document.createElement("div");
  box.className = "charts";
  const memory = document.createElement("div");
  const layers = document.createElement("div");
  memory.id = index ? `plan-memory-${index}` : "plan-memory";
  layers.id = index ? `plan-layers-${index}` : "plan-layers";
  box.append(memory, layers);
  root.append(box);
  const prefix = title ? `${title}: ` : "";
  Plotly.newPlot(memory, [
    ...KINDS.map(([key, label]) => ({ type: "bar", name: label, x: names, y: used.map((s) => s.memory[key] / MiB) })),
    // The head's marker only when it holds layers: its whole free RAM would flatten every other bar.
    { type: "scatter", mode: "markers", name: "usable", x: names,
      y: used.map((s) => (s.machine === "head" && s.count === 0 ? null : s.usable / MiB)),
      marker: { symbol: "line-ew-open", size: 40, line: { width: 3 } } },
  ], { ...layout(`${prefix}predicted memory per machine`, "memory (MiB)", { hovermode: "closest" }),
    barmode: "stack", xaxis: { title: { text: "machine" } } }, CONFIG);
  Plotly.newPlot(layers, used.filter((s) => s.count > 0).map((s) => ({
    type: "bar", orientation: "h", name: s.machine, y: ["layers"], x: [s.count], base: [s.first],
    hovertemplate: `${s.machine}: layers ${s.first}–${s.first + s.count - 1}<extra></extra>`,
  })), { ...layout(`${prefix}which layers sit where`, "", { hovermode: "closest", height: 220 }),
    barmode: "overlay", xaxis: { title: { text: "layer number" } } }, CONFIG);
}

JSON.parse(document.getElementById("plan-data").textContent).forEach(draw);
