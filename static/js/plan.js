// Plans, drawn: each machine's predicted memory by kind against what it may use, and where the layers sit;
// one pair of charts per plan (the plan page draws every mode that fits, a deployment its own).
import { CONFIG, layout, xaxis } from "./charts.js";
import { GiB, MiB, size } from "./units.js";

const KINDS = [["weights", "weights"], ["kv_cache", "KV cache"], ["compute", "compute buffer"], ["overhead", "runtime"]];
const root = document.getElementById("plan-charts");

function total(stage) {
  return KINDS.reduce((sum, [key]) => sum + stage.memory[key], 0);
}

// Each machine's stack, its total written above it, so a bar too thin to see still reads. What a machine
// may use is a mark on its bar, or, when that would flatten every bar (a laptop with 20 GiB free beside
// stacks of tens of MiB), words under its name.
function memoryChart(element, used, title) {
  const names = used.map((s) => s.machine);
  const room = (s) => (s.machine === "head" && s.count === 0 ? null : s.usable);
  const most = Math.max(...used.map(total));
  const marked = Math.max(...used.map((s) => room(s) || 0)) <= 4 * most;
  const top = Math.max(most, ...(marked ? used.map((s) => room(s) || 0) : []));
  const [unitName, unit] = top < GiB ? ["MiB", MiB] : ["GiB", GiB];
  const traces = KINDS.map(([key, label]) => ({
    type: "bar", name: label, x: names, y: used.map((s) => s.memory[key] / unit),
    customdata: used.map((s) => size(s.memory[key])), hovertemplate: `%{x}, ${label}: %{customdata}<extra></extra>`,
  }));
  if (marked) {
    traces.push({ type: "scatter", mode: "markers", name: "usable", x: names, y: used.map((s) => room(s) && room(s) / unit),
      customdata: used.map((s) => size(s.usable)), hovertemplate: "%{x} may use %{customdata}<extra></extra>",
      marker: { symbol: "line-ew-open", size: 40, line: { width: 3 } } });
  }
  traces.push({ type: "scatter", mode: "text", x: names, y: used.map((s) => total(s) / unit),
    text: used.map((s) => size(total(s))), textposition: "top center", cliponaxis: false, showlegend: false,
    hoverinfo: "skip" });
  const ticks = used.map((s) => (marked || !room(s) ? s.machine : `${s.machine}<br>of ${size(room(s))}`));
  const axis = xaxis(marked ? "machine" : "machine, of what it may use",
    { tickvals: names, ticktext: ticks, tickangle: 0, tickfont: { size: 11 } });
  Plotly.newPlot(element, traces, { ...layout(title, `memory (${unitName})`, { hovermode: "closest" }),
    barmode: "stack", xaxis: axis }, CONFIG);
}

// Layers 0 to n_layer − 1, then the output layer, which llama.cpp counts as layer n_layer.
function layersChart(element, used, title) {
  const outputLayer = used.reduce((sum, s) => sum + s.count, 0) - 1;
  const named = (s) => {
    const last = s.first + s.count - 1;
    if (last < outputLayer) return `layers ${s.first}–${last}`;
    return s.count === 1 ? "the output layer" : `layers ${s.first}–${last - 1} and the output layer (${outputLayer})`;
  };
  Plotly.newPlot(element, used.filter((s) => s.count > 0).map((s) => ({
    type: "bar", orientation: "h", name: s.machine, y: ["layers"], x: [s.count], base: [s.first],
    hovertemplate: `${s.machine}: ${named(s)}<extra></extra>`,
  })), { ...layout(title, "", { hovermode: "closest", height: 240 }), barmode: "overlay",
    xaxis: xaxis(`layer number (${outputLayer} is the output layer)`) }, CONFIG);
}

function draw({ title, plan }, index) {
  const used = plan.stages.filter((s) => s.count > 0 || s.machine === "head");
  const box = document.createElement("div");
  box.className = "charts";
  const memory = document.createElement("div");
  const layers = document.createElement("div");
  memory.id = index ? `plan-memory-${index}` : "plan-memory";
  layers.id = index ? `plan-layers-${index}` : "plan-layers";
  box.append(memory, layers);
  root.append(box);
  const prefix = title ? `${title}: ` : "";
  memoryChart(memory, used, `${prefix}predicted memory`);
  layersChart(layers, used, `${prefix}where the layers sit`);
}

JSON.parse(document.getElementById("plan-data").textContent).forEach(draw);
