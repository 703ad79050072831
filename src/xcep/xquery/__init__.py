"""XQuery FLWOR with the window clause and the regular-expression pattern clause.

Seed: Fischer, Garg, Esmaili (ETH, MXQuery). (Being built: issue 7.)
"""
