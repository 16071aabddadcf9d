// Node page charts: this laptop's CPU (total and per core), memory and network.
import { LiveChart } from "./charts.js";
import { GiB, MB } from "./units.js";

export async function nodeCharts(root) {
  const nodeId = root.dataset.node;
  const charts = [
    new LiveChart(root.querySelector("[data-chart=cpu]"), {
      title: "CPU", unit: "CPU %",
      series: (s) => [{ key: `${s.node}:cpu`, name: "total", y: s.cpu },
        ...s.cores.map((y, i) => ({ key: `${s.node}:core${i}`, name: `core ${i}`, y }))],
    }),
    new LiveChart(root.querySelector("[data-chart=ram]"), {
      title: "Memory", unit: "memory (GiB)",
      series: (s) => [{ key: `${s.node}:used`, name: "used", y: s.ram_used / GiB },
        { key: `${s.node}:total`, name: "total", y: s.ram_total / GiB },
        { key: `${s.node}:swap`, name: "swap used", y: s.swap_used / GiB }],
    }),
    new LiveChart(root.querySelector("[data-chart=net]"), {
      title: "Network", unit: "network (MB/s)",
      series: (s) => [{ key: `${s.node}:rx`, name: "in", y: s.rx / MB }, { key: `${s.node}:tx`, name: "out", y: s.tx / MB }],
    }),
  ];
  const history = await (await fetch(`${root.dataset.recent}?node=${nodeId}&seconds=600`)).json();
  for (const node of history.nodes) {
    charts.forEach((chart) => chart.add(node.samples.map((s) => ({ ...s, node: node.id, history: true }))));
    if (node.status === "offline") charts.forEach((chart) => chart.mark(node.id, true));
  }
  return (message) => {
    if (message.type === "metrics") charts.forEach((chart) => chart.add([message]));
    if (message.type === "state" && message.state === "offline") charts.forEach((c) => c.gap(message.node, message.t));
  };
}
