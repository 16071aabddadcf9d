// Laptops page: tick laptops (one box each, or all at once) for the action bar, and follow the chosen action on
// each laptop live, through one stream of the whole selection; when all have ended, its summary, and the table
// drawn again with what the actions changed.
import { showAction } from "./actions.js";

const form = document.getElementById("laptops-form");
const selection = document.getElementById("selection");

const boxes = () => [...document.querySelectorAll('#laptops tbody input[name="node"]')];

function tally() {
  const all = document.getElementById("choose-all");
  const ticked = boxes().filter((box) => box.checked).length;
  all.checked = ticked > 0 && ticked === boxes().length;
  all.indeterminate = ticked > 0 && ticked < boxes().length;
  document.getElementById("chosen-count").textContent = ticked
    ? `${ticked} of ${boxes().length} chosen:` : "Act on the laptops ticked below:";
}

function chooseAll(event) {
  for (const box of boxes()) box.checked = event.target.checked;
  tally();
}

// The table as the server draws it now (states, servers, removed laptops gone), keeping what is ticked.
async function redraw() {
  const ticked = new Set(boxes().filter((box) => box.checked).map((box) => box.value));
  const answer = await fetch(location.href, { headers: { Accept: "text/html" } });
  if (!answer.ok) return;
  const fresh = new DOMParser().parseFromString(await answer.text(), "text/html").querySelector("#laptops tbody");
  if (!fresh) return;
  for (const box of fresh.querySelectorAll('input[name="node"]')) box.checked = ticked.has(box.value);
  document.querySelector("#laptops tbody").replaceWith(document.adoptNode(fresh));
  tally();
}

function follow() {
  const source = new EventSource(selection.dataset.events);
  source.onmessage = (event) => {
    const state = JSON.parse(event.data);
    for (const action of state.actions) {
      const item = document.getElementById(`action-${action.id}`);
      if (item) showAction(item, action);
    }
    const summary = document.getElementById("selection-summary");
    summary.textContent = state.summary;
    if (state.ended) {
      source.close();  // else EventSource opens the ended stream again, and again
      summary.classList.add("ended");
      if (form) redraw();
    }
  };
}

if (form) {
  const all = document.getElementById("choose-all");
  all.hidden = false;
  all.addEventListener("change", chooseAll);
  form.addEventListener("change", (event) => { if (event.target.name === "node") tally(); });
  tally();
}
if (selection && !document.getElementById("selection-summary").classList.contains("ended")) follow();
