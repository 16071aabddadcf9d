// Node page: actions update in place as the workers report progress; charts grow live.
import { showAction } from "./actions.js";
import { live } from "./live.js";
import { nodeCharts } from "./node-charts.js";

const list = document.getElementById("actions");

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
  if (action.kind === "build_runtime" && action.progress?.log && !item.querySelector(".log-link")) {
    const link = document.createElement("a");  // the build's whole log, read from the laptop
    link.className = "log-link";
    link.href = `${location.pathname.replace(/\/$/, "")}/actions/${action.id}/log/`;
    link.textContent = "log";
    item.querySelector(".message").after(" ", link);
  }
  return item;
}

const onChartMessage = await nodeCharts(document.getElementById("node-charts"));
live(`/ws/nodes/${list.dataset.node}/`, (message) => {
  if (message.type === "action") showAction(row(message), message);
  else onChartMessage(message);
});
