"""The physics of a system: nuclei and electrons (systems), the Hamiltonian and its
local energy (hamiltonian), and Hartree-Fock orbitals (hartree_fock)."""
