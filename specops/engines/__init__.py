"""vLLM engine knowledge: capability/known-bug tables, argv rendering, local processes.

Only this package touches vllm, and only lazily.
"""
