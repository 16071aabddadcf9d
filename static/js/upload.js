// Models page: upload a GGUF file in chunks, each sent with the offset it starts at. A dropped connection
// costs one chunk (retried with backoff); after a reload, picking the same file again makes the panel
// answer with the unfinished upload (same name, size and date) and its offset, and it goes on from there.
import { MB, size as sizeOf } from "./units.js";

const form = document.getElementById("upload-form");
const fileInput = document.getElementById("upload-file");
const nameInput = document.getElementById("upload-name");
const startButton = document.getElementById("upload-start");
const pauseButton = document.getElementById("upload-pause");
const cancelButton = document.getElementById("upload-cancel");
const progress = document.getElementById("upload-progress");
const bar = progress.querySelector("progress");
const rate = progress.querySelector(".rate");
const errorText = document.getElementById("upload-error");
const csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;
const RETRIES = 8;

let current = null;  // {file, url, offset, chunk, controller, paused, since: {time, offset}}

class Refused extends Error {}  // the panel said no: the upload is over
class Dropped extends Error {}  // the network gave up: Resume may still work

async function call(method, url, { body, headers = {}, signal } = {}) {
  const response = await fetch(url, { method, body, signal, headers: { "X-CSRFToken": csrf, ...headers } });
  const json = (response.headers.get("Content-Type") || "").includes("application/json");
  const data = json ? await response.json() : {};
  if (response.status >= 500) throw new Error(`the panel answered HTTP ${response.status}`);
  if (response.status === 401) throw new Refused("You were logged out: reload the page, log in, and pick the file again.");
  if (!json || response.redirected) {
    throw new Refused(response.status === 403 ? "Only lab admins can upload models."
      : `The panel answered HTTP ${response.status}; reload the page (were you logged out?).`);
  }
  return { status: response.status, data };
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function show(upload, note = "") {
  const { size } = upload.file;
  const seconds = (performance.now() - upload.since.time) / 1000;
  const speed = seconds > 0.5 ? (upload.offset - upload.since.offset) / seconds : 0;
  const left = speed > 0 ? ` · ${Math.ceil((size - upload.offset) / speed)} s left` : "";
  bar.max = size;
  bar.value = upload.offset;
  rate.textContent = note || `${sizeOf(upload.offset)} of ${sizeOf(size)} · `
    + `${(speed / MB).toFixed(1)} MB/s${left}`;
}

function setRunning(running) {
  startButton.hidden = running;
  pauseButton.hidden = !running;
  pauseButton.textContent = "Pause";
  cancelButton.hidden = !running;
  fileInput.disabled = nameInput.disabled = running;
}

async function sendChunk(upload) {
  const end = Math.min(upload.offset + upload.chunk, upload.file.size);
  for (let attempt = 1; ; attempt++) {
    upload.controller = new AbortController();
    try {
      return await call("PATCH", upload.url, {
        body: upload.file.slice(upload.offset, end), signal: upload.controller.signal,
        headers: { "Upload-Offset": String(upload.offset), "Content-Type": "application/octet-stream" },
      });
    } catch (error) {
      if (error instanceof Refused || upload.paused) throw error;
      if (attempt > RETRIES) throw new Dropped(`The connection keeps dropping (${error.message}); press Resume.`);
      const wait = Math.min(500 * 2 ** attempt, 30000);
      show(upload, `Connection lost; trying again in ${Math.round(wait / 1000)} s…`);
      await sleep(wait);
    }
  }
}

async function run(upload) {
  upload.since = { time: performance.now(), offset: upload.offset };
  for (;;) {  // also sends an empty chunk when every byte is there but the file was not finished
    const answer = await sendChunk(upload);
    if (answer.status >= 400 && answer.status !== 409) throw new Refused(answer.data.error);
    upload.offset = answer.data.offset;
    show(upload);
    if (answer.data.url) return location.assign(answer.data.url);
    if (upload.paused) return show(upload, `Paused at ${sizeOf(upload.offset)}.`);
  }
}

async function go(upload) {
  errorText.textContent = "";
  setRunning(true);
  try {
    await run(upload);
  } catch (error) {
    if (upload.paused) return;
    const known = error instanceof Refused || error instanceof Dropped;
    errorText.textContent = known ? error.message : `Upload stopped: ${error.message}`;
    pauseButton.textContent = "Resume";
    if (error instanceof Refused) finished();
  }
}

function finished() {
  current = null;
  setRunning(false);
  progress.hidden = true;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  const file = fileInput.files[0];
  if (!file) {
    errorText.textContent = "Choose a GGUF file first.";
    return;
  }
  try {
    const answer = await call("POST", form.dataset.start, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: file.name, size: file.size, modified: file.lastModified, model_name: nameInput.value }),
    });
    if (answer.status >= 400) throw new Refused(answer.data.error);
    const { url, offset, chunk } = answer.data;
    current = { file, url, offset, chunk, paused: false, since: { time: performance.now(), offset } };
  } catch (error) {
    errorText.textContent = error instanceof Refused ? error.message : `Cannot reach the panel: ${error.message}`;
    return;
  }
  progress.hidden = false;
  show(current, current.offset ? `Continuing at ${sizeOf(current.offset)}…` : "Starting…");
  go(current);
});

pauseButton.addEventListener("click", async () => {
  const upload = current;
  if (!upload.paused && pauseButton.textContent === "Pause") {
    upload.paused = true;
    upload.controller.abort();
    pauseButton.textContent = "Resume";
    show(upload, `Paused at ${sizeOf(upload.offset)}.`);
    return;
  }
  upload.paused = false;
  try {  // the panel's count is the truth: a chunk may have landed just before the pause
    upload.offset = (await call("GET", upload.url)).data.offset ?? upload.offset;
  } catch (error) {
    errorText.textContent = `Cannot reach the panel: ${error.message}`;
    return;
  }
  go(upload);
});

cancelButton.addEventListener("click", async () => {
  const upload = current;
  upload.paused = true;
  upload.controller?.abort();
  finished();
  try {
    await call("DELETE", upload.url);
  } catch (error) {
    errorText.textContent = `The panel may still hold the part already sent: ${error.message}`;
  }
});
