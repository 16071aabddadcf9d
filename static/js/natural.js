// Names in the order people count them (hid5-2 before hid5-10), as clusterpanel/kit/natural.py sorts them on the
// server: Intl.Collator's numeric collation compares runs of digits as numbers.
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

export const naturalCompare = (a, b) => collator.compare(String(a ?? ""), String(b ?? ""));

export function naturalSorted(items, key = (item) => item) {
  return [...items].sort((a, b) => naturalCompare(key(a), key(b)));
}
