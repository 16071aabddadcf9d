// One laptop action's line (a laptop's page, the Laptops page's selection), updated in place as the workers
// report: its state, its message, and a copy's progress bar.
const LABELS = { queued: "Queued", running: "Running", succeeded: "Succeeded", failed: "Failed" };

function progressBar(item) {
  let bar = item.querySelector(".progress");
  if (!bar) {
    bar = document.createElement("div");
    bar.className = "progress";
    bar.innerHTML = '<progress></progress> <span class="rate"></span>';
    item.append(bar);
  }
  return bar;
}

export function showAction(item, action) {
  item.className = `action ${action.status}`;
  item.querySelector(".status").textContent = LABELS[action.status] || action.status;
  item.querySelector(".message").textContent = action.error || action.message;
  const progress = action.progress || {};
  if (progress.bytes_total) {
    const bar = progressBar(item);
    bar.querySelector("progress").max = progress.bytes_total;
    bar.querySelector("progress").value = progress.bytes_done;
    const eta = progress.eta_s ? ` · ${Math.round(progress.eta_s)} s left` : "";
    bar.querySelector(".rate").textContent = `${progress.mb_per_s} MB/s${eta}`;
  }
}
