"""Shared session state of a host across workers: cookies (:mod:`.cookies`) and friends.

Kept free of imports so the modules of this package load independently.
"""
