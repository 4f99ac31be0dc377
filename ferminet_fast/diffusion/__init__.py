"""Fixed-node diffusion Monte Carlo from a trained run: the walk (walk: moves, weights,
branching) and the stage that runs it at each time step (stage)."""
