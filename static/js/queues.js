// Dashboard: each deployment's waiting jobs and its engine's slots and tokens/s, refreshed every few seconds
// while the page is in view (drawn as templates/home.html draws them).
const root = document.getElementById("queues");
const body = root.querySelector("tbody");
const EVERY_MS = 2000;  // the engine refreshes its figures every 2 s while it generates

function cell(text, className = "n") {
  const td = document.createElement("td");
  td.className = className;
  td.textContent = text;
  return td;
}

function row(deployment) {
  const tr = document.createElement("tr");
  tr.dataset.deployment = deployment.id;
  const link = document.createElement("a");
  link.href = deployment.url;
  link.textContent = deployment.name;
  const badge = document.createElement("span");
  badge.className = `badge state-${deployment.status}`;
  badge.textContent = deployment.label;
  const load = deployment.load;
  tr.append(cell("", ""), cell("", ""), cell(deployment.running), cell(deployment.interactive), cell(deployment.batch),
    cell(load ? `${load.busy} of ${load.slots}` : "—"), cell(load ? `${load.tokens_per_s.toFixed(1)} tokens/s` : "—"),
    cell(deployment.predicted == null ? "—" : `${deployment.predicted} tokens/s`), cell(deployment.users.length ? deployment.users.join(", ") : "nobody", ""));
  tr.cells[0].append(link);
  tr.cells[1].append(badge);
  return tr;
}

function nothingRunning() {
  const link = document.createElement("a");
  link.href = root.dataset.plan;
  link.textContent = "plan one";
  const td = cell("No deployment is running: ", "");
  td.colSpan = 9;
  td.append(link, ".");
  const tr = document.createElement("tr");
  tr.append(td);
  return tr;
}

async function refresh() {
  if (document.hidden) return;
  const response = await fetch(root.dataset.url);
  if (!response.ok) return;  // signed out or the panel restarting: keep the last figures
  const { deployments } = await response.json();
  body.replaceChildren(...(deployments.length ? deployments.map(row) : [nothingRunning()]));
}

async function keepRefreshing() {
  for (;;) {
    await new Promise((resolve) => { setTimeout(resolve, EVERY_MS); });
    await refresh().catch(() => {});  // the panel away for a moment: try again next time
  }
}

keepRefreshing();
