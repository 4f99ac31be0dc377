"""Wavefunction ansatzes for ONE electron configuration: FermiNet and Psiformer
(networks), with their envelopes, determinants and Jastrow factors; several states at once
(states); the Network interface and determinant they share (base)."""
