// Dashboard: every laptop's CPU, memory and network, live.
import { live } from "./live.js";
import { LiveChart } from "./charts.js";
import { GiB, MB } from "./units.js";

const root = document.getElementById("cluster-charts");
const name = (s) => s.name;
const charts = [
  new LiveChart(root.querySelector("[data-chart=cpu]"), {
    title: "CPU", unit: "CPU %", series: (s) => [{ key: `${s.node}:cpu`, name: name(s), y: s.cpu }],
  }),
  new LiveChart(root.querySelector("[data-chart=ram]"), {
    title: "Memory used", unit: "memory (GiB)", series: (s) => [{ key: `${s.node}:ram`, name: name(s), y: s.ram_used / GiB }],
  }),
  new LiveChart(root.querySelector("[data-chart=net]"), {
    title: "Network in + out", unit: "network (MB/s)", series: (s) => [{ key: `${s.node}:net`, name: name(s), y: (s.rx + s.tx) / MB }],
  }),
];

function setState(nodeId, state) {
  const badge = document.querySelector(`[data-node-state="${nodeId}"]`);
  if (badge) {
    badge.textContent = state === "offline" ? "Offline" : "Ready";
    badge.className = `badge state-${state}`;
  }
}

const response = await fetch(`${root.dataset.recent}?seconds=600`);
const history = await response.json();
for (const node of history.nodes) {
  const samples = node.samples.map((s) => ({ ...s, node: node.id, name: node.name, history: true }));
  charts.forEach((chart) => chart.add(samples));
  if (node.status === "offline") charts.forEach((chart) => chart.mark(node.id, true));
}
live("/ws/dashboard/", (message) => {
  if (message.type === "metrics") {
    charts.forEach((chart) => chart.add([message]));
    setState(message.node, "ready");
  } else if (message.type === "state") {
    setState(message.node, message.state);
    if (message.state === "offline") charts.forEach((chart) => chart.gap(message.node, message.t));
  }
});
