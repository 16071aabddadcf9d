// Plans, drawn: each machine's predicted memory by kind against what it may use, and where the layers sit;
// one pair of charts per plan (the plan page draws every mode that fits, a deployment its own).
// Machines stay in pipeline order. Past a few machines the memory bars lie down, one row per machine with its
// name in full, where 39 upright bars cut their names to "hid5-:"; the layers are one row per machine at any
// size, one colour with the bottleneck marked, where a trace per machine gave a 39-entry legend in 10 colours.
import { CONFIG, layout, xaxis } from "./charts.js";
import { GiB, MiB, size } from "./units.js";

const KINDS = [["weights", "weights"], ["kv_cache", "KV cache"], ["compute", "compute buffer"], ["overhead", "runtime"]];
const UPRIGHT_UP_TO = 8;  // machines whose names fit side by side under upright bars on a laptop screen
const ROW_PX = 18;
const LAYERS_COLOUR = "#4c78a8";
const BOTTLENECK_COLOUR = "#d62728";
const root = document.getElementById("plan-charts");

// A stage as the words name it: its laptop, or "gpu1's Vulkan0" where the laptop has several devices in the plan
// (each a stage of its own, which would otherwise share one bar); plans recorded before devices have no label.
const nameOf = (s) => s.label || s.machine;

function total(stage) {
  return KINDS.reduce((sum, [key]) => sum + stage.memory[key], 0);
}

// Rows' charts grow with their machines, so each name keeps a readable line.
function rowsHeight(count, extra) {
  return Math.max(200, 110 + extra + ROW_PX * count);
}

// Each machine's stack, its total written beside it, so a bar too thin to see still reads. What a machine
// may use is a mark on its bar, or, when that would flatten every bar (a laptop with 20 GiB free beside
// stacks of tens of MiB), words with its name.
function memoryChart(element, used, title) {
  const upright = used.length <= UPRIGHT_UP_TO;
  const names = used.map(nameOf);
  const room = (s) => (s.machine === "head" && s.count === 0 ? null : s.usable);
  const most = Math.max(...used.map(total));
  const marked = Math.max(...used.map((s) => room(s) || 0)) <= 4 * most;
  const top = Math.max(most, ...(marked ? used.map((s) => room(s) || 0) : []));
  const [unitName, unit] = top < GiB ? ["MiB", MiB] : ["GiB", GiB];
  // One place to turn a (machine, value) pair the way the bars stand.
  const along = (values) => (upright ? { x: names, y: values } : { y: names, x: values, orientation: "h" });
  const traces = KINDS.map(([key, label]) => ({
    type: "bar", name: label, ...along(used.map((s) => s.memory[key] / unit)),
    customdata: used.map((s) => size(s.memory[key])),
    hovertemplate: `${upright ? "%{x}" : "%{y}"}, ${label}: %{customdata}<extra></extra>`,
  }));
  if (marked) {
    const { orientation, ...at } = along(used.map((s) => room(s) && room(s) / unit));
    traces.push({ type: "scatter", mode: "markers", name: "usable", ...at,
      customdata: used.map((s) => size(s.usable)),
      hovertemplate: `${upright ? "%{x}" : "%{y}"} may use %{customdata}<extra></extra>`,
      marker: { symbol: upright ? "line-ew-open" : "line-ns-open", size: upright ? 40 : 14, line: { width: 3 } } });
  }
  const { orientation, ...labelled } = along(used.map((s) => total(s) / unit));
  traces.push({ type: "scatter", mode: "text", ...labelled, text: used.map((s) => size(total(s))),
    textposition: upright ? "top center" : "middle right", cliponaxis: false, showlegend: false,
    hoverinfo: "skip", textfont: { size: upright ? 12 : 10 } });
  const ticks = used.map((s) => (marked || !room(s) ? nameOf(s) : `${nameOf(s)}${upright ? "<br>" : " "}of ${size(room(s))}`));
  const machineAxis = { tickvals: names, ticktext: ticks, tickangle: 0, tickfont: { size: upright ? 11 : 10 },
    automargin: true };
  const machineTitle = marked ? "machine" : "machine, of what it may use";
  const base = layout(title, upright ? `memory (${unitName})` : "", { hovermode: "closest" });
  const axes = upright
    ? { xaxis: xaxis(machineTitle, machineAxis) }
    : { yaxis: { ...machineAxis, autorange: "reversed", title: { text: "" } },
      xaxis: xaxis(`memory (${unitName})`, { rangemode: "tozero" }),
      height: rowsHeight(used.length, 40), margin: { ...base.margin, r: 56 } };
  Plotly.newPlot(element, traces, { ...base, barmode: "stack", ...axes }, CONFIG);
}

// Layers 0 to n_layer − 1, then the output layer, which llama.cpp counts as layer n_layer: a row per machine
// from its first layer to its last, a staircase down the pipeline.
function layersChart(element, used, title, bottleneck) {
  const outputLayer = used.reduce((sum, s) => sum + s.count, 0) - 1;
  const holding = used.filter((s) => s.count > 0);
  const named = (s) => {
    const last = s.first + s.count - 1;
    if (last < outputLayer) return s.count === 1 ? `layer ${s.first}` : `layers ${s.first}–${last}`;
    return s.count === 1 ? "the output layer" : `layers ${s.first}–${last - 1} and the output layer (${outputLayer})`;
  };
  const trace = { type: "bar", orientation: "h", y: holding.map(nameOf), x: holding.map((s) => s.count),
    base: holding.map((s) => s.first), showlegend: false, customdata: holding.map(named),
    marker: { color: holding.map((s) => (nameOf(s) === bottleneck ? BOTTLENECK_COLOUR : LAYERS_COLOUR)) },
    hovertemplate: "%{y}: %{customdata}<extra></extra>" };
  const key = { type: "bar", orientation: "h", y: [null], x: [null], name: `the bottleneck, ${bottleneck}`,
    marker: { color: BOTTLENECK_COLOUR }, hoverinfo: "skip" };
  Plotly.newPlot(element, [trace, key], { ...layout(title, "", { hovermode: "closest" }),
    height: rowsHeight(holding.length, 20), barmode: "overlay", showlegend: true,
    yaxis: { autorange: "reversed", automargin: true, tickfont: { size: 10 }, type: "category",
      tickvals: holding.map(nameOf) },
    xaxis: xaxis(`layer number (${outputLayer} is the output layer)`, { range: [0, outputLayer + 1] }) }, CONFIG);
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
  layersChart(layers, used, `${prefix}where the layers sit`, plan.bottleneck_label || plan.bottleneck);
}

JSON.parse(document.getElementById("plan-data").textContent).forEach(draw);
