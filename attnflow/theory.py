"""Closed forms from the papers (MATH.md), each tested against an independent computation.

Functions are grouped by topic in private modules and re-exported here.
"""
