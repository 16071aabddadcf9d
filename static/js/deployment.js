// Deployment page: its state changes in place; a finished preparation reloads the table of servers.
import { live } from "./live.js";

const detail = document.getElementById("deployment-detail");
const badge = document.getElementById("deployment-status");
live(`/ws/deployments/${detail.dataset.deployment}/`, (message) => {
  if (message.type !== "status") return;
  badge.textContent = message.label;
  badge.className = `badge state-${message.status}`;
  detail.textContent = message.detail;
  if (["ready", "failed", "stopped"].includes(message.status)) setTimeout(() => location.reload(), 500);
});
