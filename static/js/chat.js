// The chat page: send a message, then render the answer token by token as the engine makes it.
// Tokens are text (textContent, never HTML); the finished answer is swapped for the server's safe Markdown.
import { retryDelay } from "./live.js";

const root = document.getElementById("chat");
const form = document.getElementById("ask");
const input = document.getElementById("text");
const sendButton = document.getElementById("send");
const stopButton = document.getElementById("stop");
const errorBox = document.getElementById("ask-error");
const turns = document.getElementById("turns");
const csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;
const scheme = location.protocol === "https:" ? "wss" : "ws";
let current = null;  // {job, li}

const url = (template, id) => template.replace("/0/", `/${id}/`);

async function post(path, body) {
  const response = await fetch(path, {
    method: "POST", body: body === undefined ? undefined : JSON.stringify(body),
    headers: { "X-CSRFToken": csrf, "Content-Type": "application/json" },
  });
  const data = await response.json().catch(() => ({ error: `The panel answered ${response.status}.` }));
  if (!response.ok) throw new Error(data.error || `The panel answered ${response.status}.`);
  return data;
}

function params() {
  const found = {};
  for (const field of document.querySelectorAll("#params input")) {
    const value = field.value.trim();
    if (field.name === "stop") found.stop = value ? value.split("|").map((s) => s.trim()).filter(Boolean) : [];
    else if (value !== "") found[field.name] = Number(value);
  }
  return found;
}

function turnItem(question) {
  const li = document.createElement("li");
  li.className = "turn";
  li.innerHTML = '<div class="question"></div><div class="answer streaming"></div><div class="meta"></div>' +
    '<p class="context-note" hidden></p>' +
    '<div class="tools" hidden><button type="button" class="link copy">Copy</button></div>';
  li.querySelector(".question").textContent = question;
  turns.append(li);
  return li;
}

function busy(on) {
  sendButton.disabled = on;
  stopButton.hidden = !on;
}

// Follow one job's events; a dropped socket reopens and the replay is skipped up to what we have.
function follow(job, li) {
  current = { job, li };
  li.dataset.job = job;
  busy(true);
  const answer = li.querySelector(".answer");
  const meta = li.querySelector(".meta");
  answer.classList.add("streaming");
  let attempt = null, lastSeq = 0, tokens = 0, firstAt = null, done = false, delay = 500;
  answer.textContent = "";
  // The job run again after its engine stopped: its events number from 1 again, and its answer starts over
  // (the socket says "restart"; a socket reopened since sees only the new attempt's numbers).
  const startAgain = (its) => {
    attempt = its;
    lastSeq = 0;
    tokens = 0;
    firstAt = null;
    answer.textContent = "";
    meta.textContent = "Its engine stopped; the answer starts again…";
  };
  const open = () => {
    const socket = new WebSocket(`${scheme}://${location.host}/ws/jobs/${job}/`);
    socket.onopen = () => { delay = 500; };
    socket.onmessage = (message) => {
      const event = JSON.parse(message.data);
      if (event.event === "restart") {
        if (attempt === null || event.attempt > attempt) startAgain(event.attempt);
        return;
      }
      if (event.seq !== undefined) {
        const its = event.attempt || 1;
        if (attempt !== null && its < attempt) return;
        if (attempt !== null && its > attempt) startAgain(its);
        attempt = its;
        if (event.seq <= lastSeq) return;
        lastSeq = event.seq;
      }
      if (event.event === "queue") meta.textContent = `Waiting: number ${event.position} in the queue…`;
      else if (event.event === "status") meta.textContent = "Thinking…";
      else if (event.event === "moved") meta.textContent = "Its replica failed: moved to another, waiting…";
      else if (event.event === "context") contextNote(li, event.dropped, event.ctx);
      else if (event.event === "token") {
        const following = nearTheEnd();
        answer.textContent += event.text;
        li.querySelector(".tools").hidden = false;
        if (following) li.scrollIntoView({ block: "end" });
        tokens += 1;
        firstAt = firstAt || event.t;
        const rate = tokens > 1 ? (tokens - 1) / (event.t - firstAt) : 0;
        meta.textContent = `${tokens} tokens${rate ? ` · ${rate.toFixed(1)} tokens/s` : ""}`;
      } else if (event.event === "retry") {
        done = true;
        socket.close();
        meta.textContent = "A laptop failed; the panel re-planned and is asking again…";
        follow(event.job, li);
      } else if (event.event === "done") {
        done = true;
        socket.close();
        finished(job, li);
      }
    };
    socket.onclose = (event) => {
      if (done || event.code === 4403) return;
      setTimeout(open, delay);  // the panel restarting or Redis away: try again
      delay = retryDelay(delay);
    };
  };
  open();
}

// The page follows a growing answer while the reader is at its end (a phone shows a few lines of it), and
// stays where it is once they scroll up to read.
function nearTheEnd() {
  return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 120;
}

// Same words as templates/jobs/context_note.html.
function contextNote(li, dropped, ctx) {
  const note = li.querySelector(".context-note");
  note.hidden = !dropped;
  note.textContent = dropped ? `Older turns no longer fit: the model did not see the first ${dropped} ` +
    `message${dropped === 1 ? "" : "s"} of this conversation (its context holds ${ctx} tokens).` : "";
}

async function finished(job, li) {
  const data = await fetch(url(root.dataset.answer, job)).then((r) => r.json());
  const answer = li.querySelector(".answer");
  answer.classList.remove("streaming");
  answer.innerHTML = data.html;  // rendered on the server from Markdown with raw HTML off
  const t = data.timings;
  const meta = li.querySelector(".meta");
  if (data.status === "failed") {
    meta.innerHTML = "";
    const error = document.createElement("span");
    error.className = "error";
    error.textContent = data.error;
    meta.append(error);
  } else {
    meta.textContent = [`${t.completion_tokens || 0} tokens`,
      t.tokens_per_s ? `${t.tokens_per_s.toFixed(1)} tokens/s` : "",
      t.time_to_first_token_s !== null ? `first token after ${t.time_to_first_token_s.toFixed(2)} s` : "",
      t.prompt_tokens ? `prompt ${t.prompt_tokens} tokens` + (t.cached_tokens ? ` (${t.cached_tokens} reused from the cache)` : "") : "",
      data.status === "cancelled" ? data.error || "stopped" : ""].filter(Boolean).join(" · ");
  }
  if (data.dropped_messages) contextNote(li, data.dropped_messages, data.ctx);
  li.dataset.status = data.status;
  li.querySelector(".tools").hidden = !answer.textContent.trim();
  if (current && current.job === job) current = null;
  busy(false);
}

// A first message names its conversation: the list and the title field say so at once.
function showTitle(title) {
  if (!title) return;
  const titleInput = document.getElementById("title");
  if (titleInput && !titleInput.value) titleInput.value = title;
  const listed = document.querySelector(".conversations li.current a");
  if (listed) listed.textContent = title;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  errorBox.textContent = "";
  const text = input.value;
  try {
    const data = await post(root.dataset.send, {
      text, params: params(), deployment: document.getElementById("deployment").value,
      system_prompt: document.getElementById("system").value,
    });
    input.value = "";
    showTitle(data.title);
    const li = turnItem(text);
    li.scrollIntoView({ block: "end" });
    follow(data.job, li);
  } catch (error) {
    errorBox.textContent = error.message;
  }
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    form.requestSubmit();
  }
});

stopButton.addEventListener("click", () => {
  if (current) post(url(root.dataset.stop, current.job)).catch((error) => { errorBox.textContent = error.message; });
});

turns.addEventListener("click", (event) => {
  if (!event.target.classList.contains("copy")) return;
  const text = event.target.closest(".turn").querySelector(".answer").innerText;
  navigator.clipboard.writeText(text).then(() => { event.target.textContent = "Copied"; },
    () => { event.target.textContent = "Copy failed"; });
  setTimeout(() => { event.target.textContent = "Copy"; }, 1500);
});

for (const li of turns.querySelectorAll(".turn")) {
  if (li.dataset.status === "queued" || li.dataset.status === "running") follow(Number(li.dataset.job), li);
}

// On a phone the settings come before the conversation, folded, instead of under all of it.
const narrow = window.matchMedia("(max-width: 900px)");
const fold = () => { document.getElementById("settings").open = !narrow.matches; };
narrow.addEventListener("change", fold);
fold();
