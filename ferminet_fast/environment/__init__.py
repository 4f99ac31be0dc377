"""The process and where it runs: XLA flags set before JAX starts (xla_flags), the host's
BLAS threads (blas_threads), stop signals (signals), machine facts and library versions
(machine), optional packages (packages), and devices and hosts: multi-host start-up, the
device mesh and walker sharding (distributed)."""
