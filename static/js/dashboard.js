// Dashboard: every laptop's CPU, memory and network, live, as heat-strips (heat-strip.js).
// Samples arrive one laptop at a time (39 a second at 39 laptops): each is only stored as it comes, and the
// strips are drawn at most once a second. Drawing per sample kept the main thread busy for good (issue 22).
import { live } from "./live.js";
import { HeatStrip, Laptops, WINDOW_S } from "./heat-strip.js";
import { GiB, MB } from "./units.js";

const DRAW_EVERY_MS = 1000;
const root = document.getElementById("heat-strip");
const percent = (value) => `${Math.round(value)} %`;
const strips = [
  new HeatStrip(root.querySelector("[data-strip=cpu]"), root.querySelector("[data-caption=cpu]"), {
    title: "CPU", value: (s) => s.cpu, say: percent, hover: "CPU %{z:.0f} %", zmax: 100,
  }),
  new HeatStrip(root.querySelector("[data-strip=ram]"), root.querySelector("[data-caption=ram]"), {
    title: "Memory used", value: (s) => (s.ram_total ? (100 * s.ram_used) / s.ram_total : null),
    say: percent, hover: "memory %{z:.0f} % of its RAM", zmax: 100,
  }),
  new HeatStrip(root.querySelector("[data-strip=net]"), root.querySelector("[data-caption=net]"), {
    title: "Network in + out", value: (s) => (s.rx + s.tx) / MB,
    say: (value) => `${value.toFixed(1)} MB/s`, hover: "network %{z:.1f} MB/s",
  }),
];
const laptops = new Laptops();
let changed = false;

function setState(nodeId, state) {
  const badge = document.querySelector(`[data-node-state="${nodeId}"]`);
  if (badge) {
    badge.textContent = state === "offline" ? "Offline" : "Ready";
    badge.className = `badge state-${state}`;
  }
}

function draw() {
  if (!changed) return;
  changed = false;
  const view = laptops.view();
  strips.forEach((strip) => strip.draw(view));
  root.querySelector(".memory-note").textContent = memoryNote(view);
}

// The strip says memory as a share of each laptop's RAM (laptops differ); the note says it in GiB for the laptop
// the memory strip calls the busiest.
function memoryNote(view) {
  const found = strips[1].found;
  const sample = found < 0 ? null : view.cells[found].filter(Boolean).pop();
  if (!sample || !sample.ram_total) return "";
  const [used, total] = [sample.ram_used / GiB, sample.ram_total / GiB];
  return `Fullest memory: ${view.rows[found].name}, ${used.toFixed(1)} of ${total.toFixed(1)} GiB.`;
}

// Live first, so nothing sent while the history loads is lost; both only store, and `draw` shows them.
live("/ws/dashboard/", (message) => {
  if (message.type === "metrics") {
    laptops.add(message.node, message.name, message);
    laptops.setOffline(message.node, false);
    setState(message.node, "ready");
  } else if (message.type === "state") {
    laptops.setOffline(message.node, message.state === "offline", message.t);
    setState(message.node, message.state);
  }
  changed = true;
});
const history = await (await fetch(`${root.dataset.recent}?seconds=${WINDOW_S}`)).json();
for (const node of history.nodes) {
  laptops.row(node.id, node.name);
  node.samples.forEach((sample) => laptops.add(node.id, node.name, sample));
  if (node.status === "offline") laptops.setOffline(node.id, true);
}
changed = true;
draw();
setInterval(draw, DRAW_EVERY_MS);
