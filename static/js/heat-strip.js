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
const LABEL_PX = 6.5;  // a character of an 11-px label, about
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

// Which row is the busiest: the largest mean over its last RANK_S seconds (the newest value alone would move
// the outline, and so the chart's layout, nearly every second among laptops that are all busy). -1: none.
const RANK_S = 5;
function busiest(z) {
  let found = -1;
  let most = -Infinity;
  z.forEach((values, i) => {
    const recent = values.slice(-RANK_S).filter((v) => v !== null);
    const mean = recent.reduce((sum, v) => sum + v, 0) / recent.length;
    if (recent.length && mean > most) [found, most] = [i, mean];
  });
  return found;
}

export class HeatStrip {
  // value(sample) -> number; say(number) -> "98 %" as the caption and hover write it; zmax: fixed or null.
  // caption: the element above the strip that names its busiest laptop (page text, not the chart's title:
  // a layout that changes makes plotly redraw the whole chart, where new data alone costs half as much).
  constructor(element, caption, { title, value, say, hover, zmax = null }) {
    Object.assign(this, { element, caption, title, value, say, hover, zmax, layout: null, shaped: "", found: -1 });
  }

  draw(view) {
    const names = view.rows.map((row) => row.name);
    const z = view.cells.map((cells) => cells.map((sample) => (sample ? this.value(sample) : null)));
    const found = busiest(z);
    this.found = found;
    const now = found < 0 ? null : z[found][z[found].length - 1];
    this.caption.textContent = now === null ? `${this.title}: no sample lately`
      : `${this.title} · busiest ${names[found]}: ${this.say(now)}`;
    const top = this.zmax || z.reduce((most, values) => values.reduce((m, v) => (v > m ? v : m), most), 1);
    const trace = {
      type: "heatmap", x: view.x, y: names, z, zmin: 0, zmax: top, colorscale: HEAT, showscale: false,
      // A pixel a cell, scaled up crisp by static/css/dashboard.css ("fast" costs half of drawing each cell
      // to the plot's size). No colour bar: plotly writes its cells an inline style attribute, which the
      // panel's policy refuses; the key is a line of text under the strips, and the hover says each value.
      zsmooth: "fast", hoverongaps: false, hovertemplate: `%{y}<br>%{x|%H:%M:%S}<br>${this.hover}<extra></extra>`,
    };
    const labels = view.rows.map((row, i) => `${i === found ? "▶ " : ""}${row.name}${row.offline ? " (offline)" : ""}`);
    if (labels.join("\n") !== this.shaped) {
      this.shaped = labels.join("\n");
      this.layout = shape(names, labels, found);
    }
    Plotly.react(this.element, [trace], this.layout, CONFIG);
  }
}

// The strip's frame: laptops top to bottom, the busiest outlined.
function shape(names, labels, found) {
  // A margin wide enough for the longest label, fixed: plotly's automargin lays the chart out twice a draw.
  const left = 12 + LABEL_PX * Math.max(4, ...labels.map((label) => label.length));
  return {
    height: 50 + names.length * ROW_PX, margin: { t: 6, r: 8, b: 30, l: left }, plot_bgcolor: "#d9d9d9",
    xaxis: { type: "date", fixedrange: true, tickformat: "%H:%M" }, uirevision: "live",
    yaxis: { autorange: "reversed", fixedrange: true, tickvals: names, ticktext: labels, tickfont: { size: 11 } },
    shapes: found < 0 ? [] : [{ type: "rect", xref: "paper", x0: 0, x1: 1, yref: "y", y0: found - 0.5,
      y1: found + 0.5, line: { color: BUSIEST, width: 2 } }],
  };
}
