// One laptop action's line (a laptop's page, the Laptops page's selection), updated in place as the workers
// report: its state, its message, and a copy's progress bar.
const LABELS = { queued: "Queued", running: "Running", succeeded: "Succeeded", failed: "Failed" };

function progressBar(item, kind = "") {
  let bar = item.querySelector(kind ? `.progress.${kind}` : ".progress:not(.steps)");
  if (!bar) {
    bar = document.createElement("div");
    bar.className = kind ? `progress ${kind}` : "progress";
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
  if (progress.steps_total) {  // a build on the laptop: ninja's [n/m], or make's percent
    const bar = progressBar(item, "steps");
    bar.querySelector("progress").max = progress.steps_total;
    bar.querySelector("progress").value = progress.steps_done;
    bar.querySelector(".rate").textContent = progress.steps_total === 100
      ? `${progress.steps_done} %` : `step ${progress.steps_done} of ${progress.steps_total}`;
  }
}
