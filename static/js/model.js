// Model page: bytes per transformer layer, the planner's raw material.
const data = JSON.parse(document.getElementById("layer-data").textContent);
const MiB = 2 ** 20;
Plotly.newPlot("layer-chart", [{
  type: "bar", x: data.layers.map((_, i) => i), y: data.layers.map((b) => b / MiB), name: "layer",
}], {
  title: { text: "Weights per layer", font: { size: 14 } }, height: 320,
  xaxis: { title: "layer" }, yaxis: { title: "MiB" }, margin: { t: 36, r: 16, b: 44, l: 52 },
}, { displaylogo: false, responsive: true });
