"""The stages of a run on the runtime: training (what it refuses before it writes, its
loop, recovery from non-finite numbers and blow-ups, the report), loading a trained run
(trained), evaluation and twist averaging. Diffusion Monte Carlo is its own package (diffusion/)."""
