"""A question a lower layer asks and an upper layer answers, typed.

The house's arrows point down: nodes/ knows nothing of deployments, models_app/ nothing of jobs. Where a lower
module must still hear from above ("which deployments hold this laptop?"), it declares a Hook with the answer
that holds while nobody above is loaded, and the app above registers its function from AppConfig.ready().
"""

from collections.abc import Callable
from typing import Generic, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class Hook(Generic[P, R]):
    """Call it as the function it stands for; `answer` puts the upper layer's function in its place."""

    def __init__(self, name: str, default: Callable[P, R]) -> None:
        self.name = name
        self.default = default
        self.function: Callable[P, R] = default

    def answer(self, function: Callable[P, R]) -> None:
        self.function = function

    @property
    def answered(self) -> bool:
        return self.function is not self.default

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.function(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Hook {self.name}{'' if self.answered else ' (unanswered)'}>"
