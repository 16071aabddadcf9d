// Node page: actions update in place as the workers report progress; charts grow live.
import { live } from "./live.js";
import { nodeCharts } from "./node-charts.js";

const list = document.getElementById("actions");
const LABELS = { queued: "Queued", running: "Running", succeeded: "Succeeded", failed: "Failed" };

function row(action) {
  let item = document.getElementById(`action-${action.id}`);
  if (!item) {
    item = document.createElement("li");
    item.id = `action-${action.id}`;
    item.innerHTML = '<strong></strong> <span class="status"></span> <span class="message"></span>';
    item.querySelector("strong").textContent = action.kind.replace("_", " ");
    list.querySelector(".empty")?.remove();
    list.prepend(item);
  }
  return item;
}

function show(action) {
  const item = row(action);
  item.className = `action ${action.status}`;
  item.querySelector(".status").textContent = LABELS[action.status] || action.status;
  item.querySelector(".message").textContent = action.error || action.message;
  const progress = action.progress || {};
  if (progress.bytes_total) {
    let bar = item.querySelector(".progress");
    if (!bar) {
      bar = document.createElement("div");
      bar.className = "progress";
      bar.innerHTML = '<progress></progress> <span class="rate"></span>';
      item.append(bar);
    }
    bar.querySelector("progress").max = progress.bytes_total;
    bar.querySelector("progress").value = progress.bytes_done;
    const eta = progress.eta_s ? ` · ${Math.round(progress.eta_s)} s left` : "";
    bar.querySelector(".rate").textContent = `${progress.mb_per_s} MB/s${eta}`;
  }
}

const onChartMessage = await nodeCharts(document.getElementById("node-charts"));
live(`/ws/nodes/${list.dataset.node}/`, (message) => {
  if (message.type === "action") show(message);
  else onChartMessage(message);
});
