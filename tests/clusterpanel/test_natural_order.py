"""Laptop names sort as people count them, on the server and (with the same rule) in the browser."""

import random

from clusterpanel.kit.natural import natural_key, natural_sorted


def test_numbers_in_names_compare_as_numbers():
    names = [f"hid5-{i}" for i in range(1, 40)]
    shuffled = random.Random(7).sample(names, len(names))
    assert natural_sorted(shuffled) == names
    assert sorted(shuffled) != names  # the plain text order this replaces puts hid5-10 after hid5-1


def test_case_and_leading_zeros_only_break_ties():
    assert natural_sorted(["Lab-10", "lab-2", "LAB-1"]) == ["LAB-1", "lab-2", "Lab-10"]
    assert natural_sorted(["lab-2", "lab-02"]) == ["lab-02", "lab-2"]
    assert natural_key("lab-2") != natural_key("lab-02")


def test_names_without_digits_and_empty_names_sort_too():
    assert natural_sorted(["b", "", "a1", "a"]) == ["", "a", "a1", "b"]


def test_key_picks_the_name():
    rows = [{"name": "n10"}, {"name": "n9"}]
    assert [row["name"] for row in natural_sorted(rows, key=lambda row: row["name"])] == ["n9", "n10"]
