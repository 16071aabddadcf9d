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
  return item;
}

const onChartMessage = await nodeCharts(document.getElementById("node-charts"));
live(`/ws/nodes/${list.dataset.node}/`, (message) => {
  if (message.type === "action") showAction(row(message), message);
  else onChartMessage(message);
});
