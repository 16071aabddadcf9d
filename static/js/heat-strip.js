// Every laptop's CPU, memory or network as one row of coloured cells, one cell a second, laptops in natural
// order. At 39 laptops 39 lines and a 39-entry legend read as nothing, and redrawing them for every sample
// held the page's main thread; a heat-strip is one image per metric, redrawn once a second whatever the count.
import { CONFIG } from "./charts.js";
import { naturalCompare } from "./natural.js";

export const WINDOW_S = 300;
// A laptop samples about once a second, so some seconds have no sample of their own: such a cell shows the one
// before, unless that is older than this; then the row has a gap (the laptop was away).
const CARRY_S = 3;
const ROW_PX = 14;
const HEAT = [[0, "#fff7ec"], [0.35, "#fdbb84"], [0.7, "#e34a33"], [1, "#7f0000"]];
const BUSIEST = "#0b63ce";

// The samples of every laptop, by whole second, for the last WINDOW_S seconds.
export class Laptops {
  constructor() {
    this.rows = new Map();  // laptop id -> {id, name, offline, samples: Map(second -> sample, or null: a gap)}
    this.newest = 0;  // the newest sample's second: the right edge of every strip
  }

  row(id, name) {
    if (!this.rows.has(id)) this.rows.set(id, { id, name, offline: false, samples: new Map() });
    const row = this.rows.get(id);
    if (name) row.name = name;
    return row;
  }

  add(id, name, sample) {
    const second = Math.floor(sample.t);
    this.row(id, name).samples.set(second, sample);
    if (second > this.newest) this.forget(second);
  }

  // Offline: the row ends here (no carrying across), and says so until samples come again.
  setOffline(id, offline, t) {
    const row = this.row(id);
    row.offline = offline;
    if (offline && t) row.samples.set(Math.floor(t) + 1, null);
  }

  forget(newest) {
    this.newest = newest;
    const oldest = newest - WINDOW_S - CARRY_S;
    for (const row of this.rows.values()) {
      for (const second of row.samples.keys()) if (second < oldest) row.samples.delete(second);
    }
  }

  // What the strips draw: the rows in natural order, the seconds shown, and per row its sample in each second.
  view() {
    const end = this.newest || Math.floor(Date.now() / 1000);
    const seconds = Array.from({ length: WINDOW_S }, (_, i) => end - WINDOW_S + 1 + i);
    const rows = [...this.rows.values()].sort((a, b) => naturalCompare(a.name, b.name));
    return { rows, x: seconds.map((s) => s * 1000), cells: rows.map((row) => carried(row, seconds)) };
  }
}

function carried(row, seconds) {
  let last = null;
  let lastSecond = -Infinity;
  const earlier = [...row.samples.keys()].filter((s) => s < seconds[0]).pop();
  if (earlier !== undefined) [last, lastSecond] = [row.samples.get(earlier), earlier];
  return seconds.map((second) => {
    if (row.samples.has(second)) [last, lastSecond] = [row.samples.get(second), second];
    return last !== null && second - lastSecond <= CARRY_S ? last : null;
  });
}

// The newest value each row shows (null: none lately), and which row has the largest.
function busiest(z) {
  const now = z.map((values) => values[values.length - 1]);
  let found = -1;
  now.forEach((value, i) => { if (value !== null && (found < 0 || value > now[found])) found = i; });
  return { now, found };
}

export class HeatStrip {
  // value(sample) -> number; say(number) -> "98 %" as the title and hover write it; zmax: fixed or null.
  constructor(element, { title, value, say, hover, zmax = null }) {
    Object.assign(this, { element, title, value, say, hover, zmax, revision: 0 });
  }

  draw(view) {
    const names = view.rows.map((row) => row.name);
    const z = view.cells.map((cells) => cells.map((sample) => (sample ? this.value(sample) : null)));
    const { now, found } = busiest(z);
    const top = this.zmax || z.reduce((most, values) => values.reduce((m, v) => (v > m ? v : m), most), 1);
    const labels = view.rows.map((row, i) => `${i === found ? "▶ " : ""}${row.name}${row.offline ? " (offline)" : ""}`);
    const said = found < 0 ? this.title : `${this.title} · busiest ${names[found]}: ${this.say(now[found])}`;
    const trace = {
      type: "heatmap", x: view.x, y: names, z, zmin: 0, zmax: top, colorscale: HEAT,
      // No colour bar: plotly writes its cells an inline style attribute, which the panel's policy refuses;
      // the legend is a line of text under the strips, and the hover says each value.
      hoverongaps: false, ygap: 1, showscale: false,
      hovertemplate: `%{y}<br>%{x|%H:%M:%S}<br>${this.hover}<extra></extra>`,
    };
    this.revision += 1;
    Plotly.react(this.element, [trace], {
      title: { text: said, font: { size: 14 }, x: 0, xanchor: "left", pad: { l: 8 } },
      height: 90 + names.length * ROW_PX, margin: { t: 36, r: 8, b: 30, l: 8 }, plot_bgcolor: "#d9d9d9",
      xaxis: { type: "date", fixedrange: true }, uirevision: "live", datarevision: this.revision,
      yaxis: { autorange: "reversed", automargin: true, fixedrange: true, tickvals: names, ticktext: labels,
        tickfont: { size: 11 } },
      shapes: found < 0 ? [] : [{ type: "rect", xref: "paper", x0: 0, x1: 1, yref: "y", y0: found - 0.5,
        y1: found + 0.5, line: { color: BUSIEST, width: 2 } }],
    }, CONFIG);
  }
}
