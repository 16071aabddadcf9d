// Live Plotly charts that grow in place, keep the user's zoom, and break their lines across gaps.
const GAP_S = 3;
const MAX_POINTS = 3600;

export class LiveChart {
  // series(sample) returns [{key, name, y}] for one sample of one laptop.
  constructor(element, { title, unit, series }) {
    this.element = element;
    this.series = series;
    this.index = new Map();  // trace key -> trace number
    this.lastT = new Map();  // trace key -> time of its last point
    Plotly.newPlot(element, [], {
      title: { text: title, font: { size: 14 } }, uirevision: "live", height: 260,
      margin: { t: 36, r: 16, b: 36, l: 52 }, xaxis: { type: "date" }, yaxis: { title: unit, rangemode: "tozero" },
      legend: { orientation: "h" },
    }, { displaylogo: false, responsive: true });
  }

  trace(key, name) {
    if (!this.index.has(key)) {
      Plotly.addTraces(this.element, { x: [], y: [], name, mode: "lines", connectgaps: false });
      this.index.set(key, this.index.size);
    }
    return this.index.get(key);
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
    const numbers = [...updates.keys()];
    Plotly.extendTraces(this.element, {
      x: numbers.map((n) => updates.get(n).x), y: numbers.map((n) => updates.get(n).y),
    }, numbers, MAX_POINTS);
  }

  // A laptop went offline: end its lines here so the gap shows even before it comes back.
  gap(nodeId, t) {
    for (const [key, number] of this.index) {
      if (key.split(":")[0] === String(nodeId)) {
        Plotly.extendTraces(this.element, { x: [[new Date(t * 1000)]], y: [[null]] }, [number], MAX_POINTS);
      }
    }
  }
}

export const GiB = 2 ** 30;
export const MB = 1e6;
