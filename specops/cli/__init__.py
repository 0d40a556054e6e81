"""The typer CLI: thin commands over the library (specops.api and capability packages).

Command modules import only typer and the standard library at module level; everything heavy is
imported inside the command body so `specops --help` starts fast.
"""
