// The engine's slots on the deployment page (drawn as templates/models_app/slots.html draws them): busy and
// free boxes with their count in words, the jobs in them, and the tokens/s generated over all of them.
const STALE_S = 5;  // as models_app/deploying/activity.py: an older tokens/s means nothing has generated since
const root = document.getElementById("slots");
// The engine stamps `at` with the server's clock, not this browser's: measure ages on the server's.
const skew = Number(root.dataset.now) - Date.now() / 1000;
const described = new Map();  // job id -> {label, url}, asked of the panel once each
let shown = null;
let staleTimer;

const whole = (value) => Number.isInteger(value) && value >= 0;

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function rate(engine) {
  const fresh = Number.isFinite(engine.at) && Date.now() / 1000 + skew - engine.at <= STALE_S;
  return fresh && Number.isFinite(engine.tokens_per_s) ? Math.max(engine.tokens_per_s, 0) : 0;
}

// Speculative decoding while it generates (as activity.py `drafting`): the share of drafts kept, tokens a step.
function drafting(engine) {
  const draft = engine.draft;
  if (!rate(engine) || !draft || !Number.isFinite(draft.kept) || !Number.isFinite(draft.per_trip)) return null;
  return `drafts ${Math.round(100 * draft.kept)}% kept, ${draft.per_trip.toFixed(2)} tokens a step`;
}

function slotLine(slots, busy, engine) {
  const boxes = element("span", "slot-boxes");
  boxes.setAttribute("aria-hidden", "true");  // the count in words says the same
  for (let n = 0; n < slots; n += 1) boxes.append(element("span", n < busy ? "slot busy" : "slot"));
  const line = element("p", "slot-line");
  line.append(boxes, element("span", "slot-count", `Slots: ${busy} of ${slots} busy`), " · ",
    element("span", "slot-rate", `${rate(engine).toFixed(1)} tokens/s`));
  const draft = drafting(engine);
  if (draft) line.append(" · ", element("span", "slot-draft", draft));
  return line;
}

function jobItem(id) {
  const about = described.get(id);
  const name = about?.url ? element("a", "", `#${id}`) : element("span", "", `#${id}`);
  if (about?.url) name.href = about.url;
  const item = element("span", "slot-job");
  item.append(name, about?.label ? ` (${about.label})` : "");
  return item;
}

function jobLine(jobs) {
  const line = element("p", "slot-jobs", "Running: ");
  jobs.forEach((id, n) => line.append(n ? ", " : "", jobItem(id)));
  return line;
}

async function describe(jobs) {
  const unknown = jobs.filter((id) => !described.has(id));
  if (!unknown.length) return;
  unknown.forEach((id) => described.set(id, null));  // asked once, even if the answer never comes
  const response = await fetch(`${root.dataset.jobs}?ids=${unknown.join(",")}`);
  if (!response.ok) return;
  for (const job of (await response.json()).jobs) described.set(job.id, job);
  if (shown) showSlots(shown);
}

export function showSlots(engine) {
  shown = engine;
  clearTimeout(staleTimer);
  root.replaceChildren();
  // Old deployments and engines not serving say nothing about slots, or nothing current.
  if (!whole(engine.slots) || engine.slots === 0 || (engine.state ?? "ready") !== "ready") return;
  const busy = Math.min(whole(engine.busy) ? engine.busy : 0, engine.slots);
  const jobs = Array.isArray(engine.jobs) ? engine.jobs.filter(whole) : [];
  root.append(slotLine(engine.slots, busy, engine));
  if (jobs.length) root.append(jobLine(jobs));
  describe(jobs).catch(() => {});  // without labels the ids still show
  // No news means nothing generates: the rate falls to 0 once it is stale.
  if (rate(engine) > 0) {
    const left = STALE_S - (Date.now() / 1000 + skew - engine.at);
    staleTimer = setTimeout(() => showSlots(engine), left * 1000 + 100);
  }
}
