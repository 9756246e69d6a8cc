"""The stand-in's torch.compiler.config: its own options and aliases of
torch._dynamo.config options, as PyTorch's."""

import sys

from torch.utils._config_module import Config, install_config_module

job_id = Config(default=None)
cache_key_tag = ""
recompile_limit = Config(alias="torch._dynamo.config.recompile_limit")
verbose = Config(alias="torch._dynamo.config.verbose")

install_config_module(sys.modules[__name__])
