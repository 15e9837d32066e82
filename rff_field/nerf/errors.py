"""The error raised for input a command cannot use (light module: no nerfstudio import)."""


class InputError(ValueError):
    """A dataset, run or option that cannot be used; the message says what is wrong and what to do."""
