"""XSCL / MMQJP: inter-document join queries with time windows, shared by query templates.

Seed: Hong, Koch, Demers, Gehrke, Riedewald, White, SIGMOD 2007. (Being built: issue 6.)
"""
