"""Wavefunction ansatzes for ONE electron configuration: FermiNet and Psiformer
(networks), with their envelopes, determinants and Jastrow factors."""
