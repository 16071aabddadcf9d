// Wide tables scroll sideways on a narrow screen, inside a region a keyboard can reach and scroll
// (a scrollable area nobody can focus is out of reach without a mouse).
for (const table of document.querySelectorAll("table.grid")) {
  if (table.parentElement.classList.contains("table-scroll")) continue;
  const region = document.createElement("div");
  region.className = "table-scroll";
  region.tabIndex = 0;
  region.setAttribute("role", "region");
  region.setAttribute("aria-label", table.querySelector("caption")?.textContent.trim() || "Table");
  table.before(region);
  region.append(table);
}
