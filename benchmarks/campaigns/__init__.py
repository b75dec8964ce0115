"""GPU campaigns: scripts that run on a GPU machine in one call and write everything under one folder.

Each runs with the machine's own Python and torch from a copy of this repository (the usage line
of each says how); what they bring back is merged into ``benchmarks/data/``.
"""
