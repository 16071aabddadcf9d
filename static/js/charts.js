// Live Plotly charts that grow in place, keep the user's zoom, and break their lines across gaps.
// Lines that lie on top of each other stay apart by dash as well as colour; a laptop gone offline keeps
// its past but is drawn faint and named "(offline)" until its samples come back.
const GAP_S = 3;
const MAX_POINTS = 3600;
const DASHES = ["solid", "dash", "dot", "dashdot", "longdash"];
const OVERLAP_POINTS = 30;

// The layout every panel chart shares: the title on the left, where the toolbar (top right) cannot cover
// it; the legend at the foot of the chart's box, under the x axis's title whatever its rows (the plot shrinks
// to make room, where a legend placed under the plot ran over the axis title); hovering lists every line.
export function layout(title, yTitle, extra = {}) {
  return {
    title: { text: title, font: { size: 14 }, x: 0, xanchor: "left", pad: { l: 8 } }, height: 300,
    margin: { t: 40, r: 12, b: 8, l: 60 }, yaxis: { title: { text: yTitle }, rangemode: "tozero", automargin: true },
    legend: { orientation: "h", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom" },
    hovermode: "x unified", ...extra,
  };
}

// An x axis whose title keeps clear of the tick labels (dates take two lines).
export function xaxis(title, extra = {}) {
  return { title: { text: title, standoff: 8 }, automargin: true, ...extra };
}

// A toolbar of two buttons, saving the chart and undoing a zoom: dragging zooms and double-clicking resets
// without one, and the whole toolbar sat on the titles of charts in half a page. On a phone, none.
const NARROW = window.matchMedia("(max-width: 700px)").matches;
export const CONFIG = { displaylogo: false, responsive: true, displayModeBar: NARROW ? false : "hover",
  modeBarButtons: [["toImage", "resetScale2d"]] };

export class LiveChart {
  // series(sample) returns [{key, name, y}] for one sample of one laptop.
  constructor(element, { title, unit, series }) {
    this.element = element;
    this.series = series;
    this.index = new Map();  // trace key -> trace number
    this.names = new Map();  // trace key -> its name while live
    this.lastT = new Map();  // trace key -> time of its last point
    this.stale = new Set();  // laptop ids drawn as offline
    this.said = "";  // the note on lines drawn on top of each other, as shown
    Plotly.newPlot(element, [], { ...layout(title, unit, { uirevision: "live" }),
      xaxis: xaxis("time", { type: "date" }) }, CONFIG);
  }

  trace(key, name) {
    if (!this.index.has(key)) {
      const dash = DASHES[this.index.size % DASHES.length];
      Plotly.addTraces(this.element, { x: [], y: [], name, mode: "lines", connectgaps: false, line: { dash } });
      this.index.set(key, this.index.size);
      this.names.set(key, name);
    }
    return this.index.get(key);
  }

  // Faint and "(offline)" while the laptop sends nothing; as before once it does.
  mark(nodeId, offline) {
    const id = String(nodeId);
    if (offline === this.stale.has(id)) return;
    if (offline) this.stale.add(id); else this.stale.delete(id);
    const keys = [...this.index.keys()].filter((key) => key.split(":")[0] === id);
    if (!keys.length) return;
    Plotly.restyle(this.element, {
      opacity: keys.map(() => (offline ? 0.35 : 1)),
      name: keys.map((key) => (offline ? `${this.names.get(key)} (offline)` : this.names.get(key))),
    }, keys.map((key) => this.index.get(key)));
  }

  add(samples) {
    const updates = new Map();
    for (const sample of samples) {
      const t = sample.t;
      for (const point of this.series(sample)) {
        const number = this.trace(point.key, point.name);
        const update = updates.get(number) || { x: [], y: [] };
        const last = this.lastT.get(point.key);
        if (last !== undefined && t - last > GAP_S) {
          update.x.push(new Date((last + 1) * 1000));
          update.y.push(null);
        }
        update.x.push(new Date(t * 1000));
        update.y.push(point.y);
        this.lastT.set(point.key, t);
        updates.set(number, update);
      }
    }
    if (!updates.size) return;
    for (const sample of samples) if (sample.node !== undefined && !sample.history) this.mark(sample.node, false);
    const numbers = [...updates.keys()];
    Plotly.extendTraces(this.element, {
      x: numbers.map((n) => updates.get(n).x), y: numbers.map((n) => updates.get(n).y),
    }, numbers, MAX_POINTS);
    this.sayOverlaps();
  }

  // Lines whose recent points are all the same are drawn on top of each other, the last one hiding the rest:
  // the chart says so under its title instead of showing one line where there are several.
  sayOverlaps() {
    const groups = new Map();
    for (const trace of this.element.data) {
      const recent = trace.y.slice(-OVERLAP_POINTS);
      if (recent.length < 2) continue;
      const key = recent.map((y) => (y === null ? "-" : Number(y).toPrecision(4))).join(",");
      groups.set(key, [...(groups.get(key) || []), trace.name]);
    }
    const same = [...groups.values()].filter((names) => names.length > 1);
    const said = same.map((names) => `${names.join(" = ")}: one line on top of another`).join("; ");
    if (said === this.said) return;
    this.said = said;
    Plotly.relayout(this.element, { annotations: said ? [{
      text: said, xref: "paper", yref: "paper", x: 0, y: 1, xanchor: "left", yanchor: "bottom",
      showarrow: false, font: { size: 11, color: "#555" },
    }] : [] });
  }

  // A laptop went offline: end its lines here so the gap shows even before it comes back.
  gap(nodeId, t) {
    for (const [key, number] of this.index) {
      if (key.split(":")[0] === String(nodeId)) {
        Plotly.extendTraces(this.element, { x: [[new Date(t * 1000)]], y: [[null]] }, [number], MAX_POINTS);
      }
    }
    this.mark(nodeId, true);
  }
}
