// Sizes as the whole panel writes them (clusterpanel/kit/units.py): binary units named as such, one decimal from
// GiB up, so a laptop's memory reads the same in a chart's hover, a table and a Python-rendered page.
export const KiB = 2 ** 10;
export const MiB = 2 ** 20;
export const GiB = 2 ** 30;
export const MB = 1e6;  // rates stay decimal, as links are sold: MB/s
const UNITS = ["bytes", "KiB", "MiB", "GiB", "TiB"];

export function size(count) {
  let value = Number(count || 0);
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return value === 1 ? "1 byte" : `${value.toFixed(0)} bytes`;
  return `${value.toFixed(unit >= 3 ? 1 : 0)} ${UNITS[unit]}`;
}
