"""The machinery of a run: command line (cli), run directory (rundir), resume decision
(resume), checkpoints, the loop and its records (loop, recorder), reports, profiling,
memory, recovery from non-finite numbers and the step watchdog (watchdog). The process
and its devices (XLA flags, threads, signals, distributed) are the environment's."""
