"""specops: operations CLI and control plane for speculative-decoding deployments on vLLM.

The library is usable without the CLI: see :mod:`specops.api`.
"""

__version__ = "0.1.0"
