"""An answer's aligned Markdown table keeps its alignment without a style attribute: the Content-Security-Policy
refuses inline style, and models write aligned tables often (tests/security/test_csp.py shows one in a browser)."""

from jobs.chat.conversations import render


def test_it_aligns_table_cells_by_class_not_by_style():
    html = render("| n | name | note |\n|--:|:-:|:--|\n| 1 | one | first |\n")
    assert "style=" not in html
    assert html.count('class="align-right"') == 2 and html.count('class="align-center"') == 2
    assert html.count('class="align-left"') == 2


def test_it_leaves_cells_without_alignment_plain():
    assert "<td>1</td>" in render("| n |\n|---|\n| 1 |\n")
