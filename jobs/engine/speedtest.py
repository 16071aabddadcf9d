"""The model's half of Measure speed (nodes/probing/speed.py holds the laptop's): the bundled model decoded greedily
through one rpc-server, its tokens per second and the bytes each token reads. jobs/apps.py hands it to
nodes/probing/speed.py when the app starts."""

from models_app.gguf.meta import read_metadata
from models_app.library.bundled import bundled_model_path
from models_app.llamacpp import oneshot
from models_app.llamacpp.libllama import LlamaCppError
from models_app.planning.planner import shape_of
from nodes.probing.speed import SpeedError

PROMPT = "<|im_start|>user\nCount from one to twenty.<|im_end|>\n<|im_start|>assistant\n"


def run_bundled(endpoint: str, tokens: int) -> tuple[float, int]:
    shape = shape_of(read_metadata(bundled_model_path()))
    per_token = sum(shape.layer_bytes) + shape.output_bytes  # the tied output reads a copy of the embedding
    try:
        answer = oneshot.complete([endpoint], PROMPT, max_tokens=tokens, timeout=300)
    except LlamaCppError as exc:
        raise SpeedError(str(exc)) from None
    return answer["completion_tokens"] / answer["seconds"], per_token
