// Model page: bytes per transformer layer, the planner's raw material; the checksum's progress, live.
import { CONFIG, layout, xaxis } from "./charts.js";
import { live } from "./live.js";

const data = JSON.parse(document.getElementById("layer-data").textContent);
const MiB = 2 ** 20;
Plotly.newPlot("layer-chart", [{
  type: "bar", x: data.layers.map((_, i) => i), y: data.layers.map((b) => b / MiB), name: "layer",
}], { ...layout("Weights per layer", "weights (MiB)", { hovermode: "closest", showlegend: false }),
  xaxis: xaxis("layer number") }, CONFIG);

const checksum = document.getElementById("checksum");
if (checksum.dataset.status === "hashing") {
  live(`/ws/models/${checksum.dataset.model}/`, (message) => {
    if (message.type !== "progress") return;
    if (message.status && message.status !== "hashing") {
      location.reload();  // done (or failed): the page shows the sum or the reason
      return;
    }
    const progress = Number(message.hash_progress ?? 0);
    document.getElementById("checksum-bar").value = progress;
    document.getElementById("checksum-percent").textContent = `${Math.round(progress * 100)} %`;
  });
}
