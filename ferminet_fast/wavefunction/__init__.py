"""Wavefunction ansatzes for ONE electron configuration: FermiNet, Psiformer and LapNet
(networks), built from their input features (features), envelopes (envelopes) and Jastrow
factors (jastrows); several states at once (states); the Network interface and determinant
they share (base)."""
