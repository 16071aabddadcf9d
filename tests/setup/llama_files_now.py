"""Pytest plugin for tests/setup/test_schedule.py: prints the files a parallel run must keep in the llama group."""

from tests import schedule


def pytest_collection_modifyitems(items):
    for name in sorted(schedule.llama_files(items)):
        print(f"LLAMA {name}")
