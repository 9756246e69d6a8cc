"""torch code that reads its config as torch's own modules do: through the
module object it imported."""

from . import config


def recompile_limit():
    return config.recompile_limit


def stub_only():
    return config.stub_only
