"""The error every check of generation parameters raises (jobs/params.py, structured.py, tools.py): a sentence a
person can act on, and the field at fault for the APIs that name it."""


class ParamError(ValueError):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param  # the field at fault, for APIs that name it
