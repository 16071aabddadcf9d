// Batch page: counts and the progress bar follow the batch live; once nothing is left to run,
// the cancel button goes.
import { live } from "./live.js";

const card = document.getElementById("batch");
const STATUSES = ["queued", "running", "retrying", "succeeded", "failed", "cancelled", "rejected"];

function show(counts) {
  for (const status of STATUSES) document.getElementById(`count-${status}`).textContent = counts[status];
  const bar = document.getElementById("batch-bar");
  bar.max = counts.total || 1;
  bar.value = counts.done;
  document.getElementById("batch-done").textContent = `${counts.done} of ${counts.total} done`;
  document.getElementById("cancel-form").hidden = counts.finished;
}

live(`/ws/batches/${card.dataset.batch}/`, (message) => {
  if (message.type === "counts") show(message);
});
