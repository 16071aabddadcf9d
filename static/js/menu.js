// On a narrow screen the navigation folds behind one button instead of widening the page.
const button = document.getElementById("menu-toggle");
if (button) {
  const bar = button.closest(".topbar");
  button.addEventListener("click", () => {
    const open = bar.classList.toggle("open");
    button.setAttribute("aria-expanded", String(open));
  });
}
