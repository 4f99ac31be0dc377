"""What every stage runs on: the command line (cli), the run directory (rundir) and a run's
context, the resume decision (resume), checkpoints, the per-step record (recorder), the
stage timers (profiling), the compiled step's memory (memory) and the step watchdog. The
process and its devices (XLA flags, threads, signals, distributed) are the environment's."""
