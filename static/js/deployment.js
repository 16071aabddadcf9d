// Deployment page: its state changes in place; each laptop's cache copy shows its bytes and rate;
// a finished preparation reloads the table of servers; the engine's slots show live (slots.js).
import { live } from "./live.js";
import { showSlots } from "./slots.js";
import { size } from "./units.js";

const detail = document.getElementById("deployment-detail");
const badge = document.getElementById("deployment-status");

function showStatus(message) {
  badge.textContent = message.label;
  badge.className = `badge state-${message.status}`;
  detail.textContent = message.detail;
  // The socket also tells the current state each time it (re)connects: reload only for news.
  const changed = message.status !== detail.dataset.status;
  detail.dataset.status = message.status;
  if (ENDED.includes(message.status)) {
    document.getElementById("engine-state").textContent = `Not running: the deployment is ${message.label.toLowerCase()}.`;
    showSlots({});
  }
  if (changed && ["ready", "failed", "stopped"].includes(message.status)) setTimeout(() => location.reload(), 500);
}

// As templates/includes/preseed.html says it: a laptop with nothing to copy did not fail.
function seeded(row) {
  if (!row.tensors) return "nothing to copy: none of this laptop's tensors is big enough to be cached";
  if (!row.copied_files) return `all ${row.tensors} tensor(s) were there already (${size(row.already)})`;
  return `copied ${row.copied_files} tensor file(s), ${size(row.sent)}; ${size(row.already)} were there already`;
}

function showPreseed(row) {
  const cell = document.getElementById(`preseed-${row.position}`);
  if (!cell) return;
  const done = row.bytes_done ?? 0;
  const total = row.bytes_total ?? row.cached_bytes ?? 0;
  let text = `${row.state}: ${size(done)} of ${size(total)}`;
  if (row.mb_per_s) text += ` · ${row.mb_per_s} MB/s`;
  if (row.state === "done") text = `done: ${seeded(row)}`;
  if (row.message && row.state !== "copying") text = `${row.state}: ${row.message}`;
  cell.innerHTML = '<span class="message"></span> <progress></progress>';
  cell.querySelector(".message").textContent = text;
  cell.querySelector("progress").max = total || 1;
  cell.querySelector("progress").value = row.state === "done" ? total || 1 : done;
}

const ENDED = ["failed", "stopped"];

function showEngine(engine) {
  // An engine's last words can arrive after its deployment ended: the page keeps saying "not running".
  if (ENDED.includes(detail.dataset.status)) return;
  const line = document.getElementById("engine-state");
  if (engine.state === "loading") {
    line.textContent = "Loading the model: ";
    const bar = document.createElement("progress");
    bar.max = 1;
    bar.value = engine.progress || 0;
    line.append(bar, ` ${Math.round((engine.progress || 0) * 100)} %`);
  } else if (engine.state === "ready") line.textContent = "Ready: the model is loaded and jobs run on it.";
  else if (engine.state === "failed") line.textContent = `Failed: ${engine.detail}`;
  showSlots(engine);
}

function showServer(server) {
  const cell = document.getElementById(`server-${server.position}`);
  if (cell) cell.textContent = `${server.port}: ${server.label}`;
  // A ready deployment over a server that failed: the recovery card says so at once, not after a reload.
  const list = document.getElementById("troubles");
  if (!list || detail.dataset.status !== "ready") return;
  const said = [...list.children].find((item) => item.dataset.node === server.node);
  if (server.status === "failed") {
    const item = said || list.appendChild(document.createElement("li"));
    item.dataset.node = server.node;
    item.textContent = `${server.node}: its rpc-server failed (${server.why}).`;
  } else if (server.status === "running" && said) said.remove();
  document.getElementById("recover").hidden = !list.children.length;
}

live(`/ws/deployments/${detail.dataset.deployment}/`, (message) => {
  if (message.type === "status") showStatus(message);
  else if (message.type === "preseed") showPreseed(message);
  else if (message.type === "engine") showEngine(message);
  else if (message.type === "server") showServer(message);
  else if (message.type === "verification" && message.result !== "running") location.reload();
});
