"""The machinery of a run: command line (cli), run directory (rundir), resume decision
(resume), checkpoints, the loop and its records (loop, recorder), reports, profiling,
recovery from non-finite numbers, stop signals, devices and hosts (distributed), machine
facts and XLA flags."""
