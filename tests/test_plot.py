"""Plots and TensorBoard scalars of a run; plot errors are one clear line."""

import os
import struct
import subprocess
import sys

import numpy as np
import pytest

from conftest import tiny_config
from ferminet_fast import InputError, plot, train


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory):
  path = tmp_path_factory.mktemp('p') / 'run'
  train.train(tiny_config('He', **{'log.save_path': str(path), 'log.tensorboard': True,
                                   'log.timers': True}), quiet=True)
  return path


def test_plot_writes_every_picture(run_dir, tmp_path):
  paths = plot.plot_run(str(run_dir), str(tmp_path))
  assert sorted(os.path.basename(p) for p in paths) == [
      'energy.png', 'pmove.png', 'timers.png', 'variance.png']
  for p in paths:
    with open(p, 'rb') as f:
      assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    assert os.path.getsize(p) > 5000


def test_running_mean_matches_a_direct_average():
  x = np.random.default_rng(0).normal(size=50)
  direct = [x[max(0, i - 6):i + 1].mean() for i in range(50)]
  np.testing.assert_allclose(plot.running_mean(x, 7), direct)


def test_plot_cli_bad_run_dir_is_one_line_error(tmp_path):
  r = subprocess.run([sys.executable, '-m', 'ferminet_fast.plot', str(tmp_path / 'none')],
                     capture_output=True, text=True)
  assert r.returncode == 2
  assert r.stderr.strip().splitlines() == [f"error: run directory '{tmp_path / 'none'}' does not exist"]
  with pytest.raises(InputError, match='stats.csv cannot be read'):
    plot.plot_run(str(tmp_path))


@pytest.mark.parametrize('name,text,words', [
    ('result.json', '[1, 2]', 'result.json is not as ferminet_fast writes it'),
    ('result.json', '{"exact_energy": "abc"}', "exact_energy = 'abc', not a number"),
    ('pes.json', '{}', 'pes.json is not as ferminet_fast writes it .no geometries.'),
    ('density.csv', 'lo,hi,rho,err\n0,x,1,2\n', 'density.csv is not a density.csv'),
])
def test_a_run_file_edited_by_hand_is_named(run_dir, tmp_path, name, text, words):
  """A file of the run that is not as training or evaluation writes it: one InputError
  naming it, before any picture is drawn."""
  import shutil
  copy = tmp_path / 'run'
  shutil.copytree(run_dir, copy)
  (copy / name).write_text(text)
  with pytest.raises(InputError, match=words):
    plot.plot_run(str(copy), str(tmp_path / 'plots'))
  assert not (tmp_path / 'plots').exists()


def test_a_plots_folder_that_cannot_be_made_is_named(run_dir, tmp_path):
  (tmp_path / 'file').write_text('')
  for out, words in ((tmp_path / 'file', 'File exists'), (tmp_path / 'file' / 'sub',
                                                          'Not a directory')):
    with pytest.raises(InputError, match=f'plots folder .* cannot be made: {words}'):
      plot.plot_run(str(run_dir), str(out))


def read_tensorboard_scalars(directory):
  """tag -> [(step, value)] from TFRecord event files (length, crc, Event proto, crc)."""
  from tensorboardX.proto import event_pb2
  out = {}
  for name in os.listdir(directory):
    with open(os.path.join(directory, name), 'rb') as f:
      data = f.read()
    i = 0
    while i < len(data):
      (n,) = struct.unpack('<Q', data[i:i + 8])
      event = event_pb2.Event.FromString(data[i + 12:i + 12 + n])
      i += 12 + n + 4
      for v in event.summary.value:
        out.setdefault(v.tag, []).append((event.step, v.simple_value))
  return out


def test_tensorboard_scalars_match_stats_csv(run_dir):
  scalars = read_tensorboard_scalars(run_dir / 'tensorboard')
  stats = plot.read_stats(str(run_dir))
  steps, energies = zip(*scalars['energy'])
  np.testing.assert_array_equal(steps, stats['step'])
  np.testing.assert_allclose(energies, stats['energy'], rtol=1e-6)
  assert {'variance', 'pmove', 'move_width', 'lr'} <= set(scalars)
