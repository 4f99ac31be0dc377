"""What a training run refuses before it writes anything, from its settings and the files
they name (the Hartree-Fock basis, the run it fine-tunes from or restores, a relaxation),
and --dry-run, which makes those checks and prints the resolved settings."""

from ferminet_fast import plan
from ferminet_fast.errors import InputError
from ferminet_fast.physics import hartree_fock, systems
from ferminet_fast.runtime import resume, rundir
from ferminet_fast.stages import relax, trained
from ferminet_fast.vmc import pretrain


def check(cfg, system: systems.System) -> None:
  """InputError where a run of `cfg` for its built `system` cannot start: a run both
  restored and fine-tuned, a basis pyscf does not know, a run to fine-tune from whose
  parameters do not fit, a relaxation it refuses. (The run directory and the run restored
  are checked as they are opened: resume.decide.)"""
  if cfg.log.restore_path and cfg.log.fine_tune_from:
    raise InputError('config.log.restore_path and config.log.fine_tune_from are both given: '
                     'restore_path continues a run, fine_tune_from starts one from another '
                     "run's parameters; give one")
  if cfg.pretrain.iterations and pretrain.available():
    hartree_fock.check_basis(cfg.pretrain.basis, system, cfg.pretrain.ecp_basis)
  if not rundir.resumes(cfg.log.save_path):  # A restart resumes its own checkpoint instead.
    trained.check_fine_tune(cfg, system)
  relax.check(cfg, system)


def dry_run(user_cfg) -> str:
  """What --dry-run prints (plan.dry_run), once the settings passed `check`, with the system
  built (its geometries and walkers), and the run to restore from was read; the run
  directory is only looked at for a checkpoint of its own (which a restart would resume),
  and nothing is written."""
  text = plan.dry_run(user_cfg)
  check(user_cfg, plan.system_of(user_cfg))
  resume.check_restore(user_cfg)
  return text
