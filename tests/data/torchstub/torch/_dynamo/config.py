"""The stand-in's torch._dynamo.config: options the seed schema declares
(recompile_limit, verbose, reorderable_logging_functions...) and options
it does not (stub_only, _private_stub), as PyTorch writes them."""

import sys

from torch.utils._config_module import Config, install_config_module

recompile_limit = 8
accumulated_recompile_limit = 256
verbose = False
reorderable_logging_functions: set = set()
log_file_name = None
stub_only = 1
stub_list = ["a"]
_private_stub = 2
old_stub = Config(default=0, deprecated=True, deprecation_message="use stub_only")
_save_config_ignore = ["stub_list"]


def helper():
    return "a function of the module"


install_config_module(sys.modules[__name__])
