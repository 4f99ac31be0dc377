"""Variational Monte Carlo: sampling (mcmc), the energy and its gradient (loss),
Hartree-Fock pretraining (pretrain), the jitted step (step) and error bars (stats)."""
