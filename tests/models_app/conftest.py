import shutil
from pathlib import Path

import pytest
from django.conf import settings


@pytest.fixture
def empty_folders() -> None:
    """No part files or uploaded models from earlier tests in this run's data folder."""
    for folder in (settings.UPLOAD_DIR, settings.MODELS_DIR):
        shutil.rmtree(Path(folder), ignore_errors=True)
