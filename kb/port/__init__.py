"""Write the fused port of planned model code, and prove it on the CPU.

``kb port`` (:mod:`kb.port.porting`) reads the plan ``kb scan --plan`` makes of a file and
rewrites, with libcst, the spans that compute a planned stage into the stage's fused call
with the arguments the plan derived; every rewritten span keeps the original code as its
fallback (``KB_PORT_UNFUSED=1``), and the ported file names its stages and the weights it
merges (``KB_PORT_STAGES``, ``KB_WEIGHT_MAP``).  ``kb verify`` (:mod:`kb.port.verify`)
builds the original and the port at a tiny size with one set of random weights, runs the
port under :mod:`kb.emulate` and measures every stage and module against the dtype's
tolerance.  Importing this package imports neither libcst nor torch.
"""
