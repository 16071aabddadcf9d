"""Serve plotly.js from the installed plotly package: the panel must work offline."""

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
STATIC_PATH = "vendor/plotly.min.js"


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=str(PLOTLY_JS.parent))
        self.storage.prefix = "vendor"

    def check(self, **kwargs):
        return []

    def find(self, path: str, find_all: bool = False, **kwargs):
        if path != STATIC_PATH:
            return [] if find_all else None
        return [str(PLOTLY_JS)] if find_all else str(PLOTLY_JS)

    def list(self, ignore_patterns):
        yield PLOTLY_JS.name, self.storage
