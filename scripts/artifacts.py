"""One format for every measured figure: a JSON artifact under benchmarks/.

  {"format": "ferminet_fast.artifact/1",
   "runs": [{"meta": {...}, "data": {...}}, ...]}

Each run is one invocation of a measuring script: `data` is what it measured (the script's
own layout), `meta` where and how: the UTC date, the machine (CPU model and cores, memory,
GPUs), the versions of Python and the libraries (and of the peer code when one ran), the
git commit and whether the tree had uncommitted changes, and the exact command line.
`write` keeps one run (a table that is re-measured whole); `append` adds a run and keeps
every earlier one (measurements that are repeated).

Files written before this format existed are converted by `adopt` into the same layout
with `meta.recorded = False`: the date and commit are those of the commit that added the
file (from git log) and the machine and versions are "not recorded" unless the old data
holds them; nothing is filled in that was not recorded.

Scripts and tests import it as `scripts.artifacts`: scripts/ is a package of the repository,
run from its root (`python -m scripts.NAME`), and is not installed with ferminet_fast.
"""

import datetime
import json
import os
import re
import shlex
import subprocess
import sys
from typing import NamedTuple, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(REPO, 'benchmarks')
FORMAT = 'ferminet_fast.artifact/1'
LIBRARIES = ('python', 'jax', 'jaxlib', 'flax', 'optax', 'folx', 'pyscf')


class Run(NamedTuple):
  """One recorded invocation: `meta` (see meta()) and `data` (the script's own layout)."""
  meta: dict
  data: object


def _git(*args: str) -> str:
  try:
    out = subprocess.run(['git', *args], cwd=REPO, capture_output=True, text=True, timeout=30)
  except (OSError, subprocess.SubprocessError):
    return ''
  return out.stdout.strip() if out.returncode == 0 else ''


# A copy of the tree sent without its git history, or with a history that is not its own (a
# machine the tree was copied to, an exported archive), names its commit here; whether it
# differs from that commit is then unknown, and the checkout's own commit, if any, is kept
# beside it.
COMMIT_VARIABLE = 'FERMINET_FAST_COMMIT'


def git_state() -> dict:
  """The commit checked out and whether tracked files other than the artifacts (which a
  script appends to while it measures) differ from it; the commit named by the environment
  variable COMMIT_VARIABLE instead, where it is set, with `dirty` unknown."""
  commit = _git('rev-parse', 'HEAD')
  if os.environ.get(COMMIT_VARIABLE):
    return {'commit': os.environ[COMMIT_VARIABLE], 'dirty': None,
            'commit_from': COMMIT_VARIABLE, 'checkout_commit': commit or None}
  dirty = (bool(_git('status', '--porcelain', '--untracked-files=no', '--', '.',
                     ':(exclude)benchmarks')) if commit else None)
  return {'commit': commit or None, 'dirty': dirty}


def meta(peer: Optional[dict] = None, argv: Optional[list] = None, **extra) -> dict:
  """The meta block of a run made now by this process. `peer`: what is known of the other
  code that ran (name, commit, versions, settings); `extra`: anything else to record."""
  from ferminet_fast.environment import machine
  versions = machine.versions()
  return {
      'recorded': True,
      'date': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
      'machine': machine.host(),
      'versions': {k: versions[k] for k in LIBRARIES if k in versions},
      'all_versions': versions,
      'peer': peer,
      **git_state(),
      'command': shlex.join(['python', *(_argv() if argv is None else argv)]),
      'interpreter': sys.executable,
      **extra,
  }


def _argv() -> list:
  """This process's command line after `python`: `-m MODULE ...` when it runs a module (as
  `python -m scripts.NAME` does), the script's path and arguments otherwise."""
  spec = getattr(sys.modules.get('__main__'), '__spec__', None)
  if spec is not None and spec.name:
    return ['-m', spec.name.removesuffix('.__main__'), *sys.argv[1:]]
  return list(sys.argv)


# A command recorded when the scripts ran as files (`python scripts/NAME.py ...`).
_SCRIPT_FILE = re.compile(r'^(\S*python\S*) +(?:\S*/)?scripts/(\w+)\.py(?= |$)')


def runnable(command: Optional[str]) -> Optional[str]:
  """A recorded command line as it is typed now: one recorded as `python scripts/NAME.py
  ...`, from before scripts/ was a package, becomes the same `python -m scripts.NAME ...`."""
  return _SCRIPT_FILE.sub(r'\1 -m scripts.\2', command) if command else command


def _path(path: str) -> str:
  return path if os.path.isabs(path) else os.path.join(REPO, path)


def _load(path: str) -> Optional[dict]:
  path = _path(path)
  if not os.path.exists(path):
    return None
  with open(path) as f:
    doc = json.load(f)
  if not (isinstance(doc, dict) and doc.get('format') == FORMAT):
    raise ValueError(f'{path} is not an artifact ({FORMAT}); convert it with adopt()')
  return doc


def _dump(path: str, doc: dict) -> None:
  path = _path(path)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  tmp = path + '.tmp'
  with open(tmp, 'w') as f:  # One line per run: appending a run adds one line to a diff.
    f.write('{"format": ' + json.dumps(doc['format']) + ', "runs": [\n')
    f.write(',\n'.join(json.dumps(r, default=str) for r in doc['runs']))
    f.write('\n]}\n')
  os.replace(tmp, path)  # A crash mid-write leaves the earlier artifact whole.


def write(path: str, data, run_meta: Optional[dict] = None) -> Run:
  """Replaces the artifact at `path` with one run of `data` (meta made now if not given)."""
  run = Run(run_meta or meta(), data)
  _dump(path, {'format': FORMAT, 'runs': [run._asdict()]})
  return run


def append(path: str, data, run_meta: Optional[dict] = None) -> Run:
  """Adds one run of `data` to the artifact at `path`, keeping every earlier run."""
  doc = _load(path) or {'format': FORMAT, 'runs': []}
  run = Run(run_meta or meta(), data)
  doc['runs'].append(run._asdict())
  _dump(path, doc)
  return run


def read(path: str) -> list:
  """The runs of the artifact at `path`, oldest first ([] when there is none)."""
  doc = _load(path)
  return [Run(r['meta'], r['data']) for r in doc['runs']] if doc else []


def latest(path: str) -> Optional[Run]:
  runs = read(path)
  return runs[-1] if runs else None


def legacy_meta(path: str, known: Optional[dict] = None) -> dict:
  """What can honestly be said of a file written before meta blocks: the commit and date
  that added it (git log), and `known` facts the old data itself holds."""
  rel = os.path.relpath(_path(path), REPO)
  added = _git('log', '--diff-filter=A', '--follow', '--format=%H %cI', '--', rel)
  commit, date = (added.splitlines()[-1].split() + [None, None])[:2] if added else (None, None)
  return {'recorded': False, 'date': date, 'commit': commit, 'dirty': None,
          'machine': None, 'versions': None, 'peer': None, 'command': None,
          'note': 'written before artifacts kept a meta block: date and commit are those '
                  'of the commit that added the file', **(known or {})}


def adopt(path: str, known: Optional[dict] = None) -> Run:
  """Converts a pre-format JSON file in place into an artifact of one run (its old content
  as `data`, legacy_meta as `meta`). Does nothing to a file already in the format."""
  doc = json.load(open(_path(path)))
  if isinstance(doc, dict) and doc.get('format') == FORMAT:
    return read(path)[-1]
  return write(path, doc, legacy_meta(path, known))


def machine_text(m: Optional[dict]) -> str:
  """'AMD EPYC, 2 cores, 7.8 GiB' or 'machine not recorded'."""
  if not m:
    return 'machine not recorded'
  if isinstance(m, str):
    return m
  parts = [m.get('cpu') or 'CPU not recorded']
  if m.get('cpu_count'):
    parts.append(f'{m["cpu_count"]} cores')
  if m.get('memory_gib'):
    parts.append(f'{m["memory_gib"]:g} GiB')
  parts += list(m.get('gpus') or [])
  return ', '.join(parts)


def minus(text: str) -> str:
  """`text` with its hyphen-minus signs as typographic minus signs, as the tables print them."""
  return text.replace('-', '−')


def num(value: float, digits: int = 6) -> str:
  """'−1.234567': a value for a table."""
  return minus(f'{value:.{digits}f}')


def pm(value: float, error: float, digits: int = 6) -> str:
  """'−1.234567 ± 0.000012': a value and its error bar."""
  return minus(f'{value:.{digits}f} ± {error:.{digits}f}')


def signed(value: float, error: float, digits: int = 2) -> str:
  """'+0.64 ± 0.10': a signed difference and its error bar."""
  return minus(f'{value:+.{digits}f} ± {error:.{digits}f}')


def newest_rows(path: str, names, field: str = 'rows', key: str = 'row') -> list:
  """[(run, row)]: the latest row of each of `names` (matched on row[key]) over the runs'
  data[field], in the order of `names`; names never measured are left out."""
  newest = {r[key]: (run, r) for run in read(path) for r in run.data[field]}
  return [newest[name] for name in names if name in newest]


def newest_runs(path: str, rows) -> list:
  """The newest run of each of `rows` (matched on the run's data['row']; every run is kept),
  in the order of `rows`; rows never measured are left out."""
  newest = {run.data['row']: run for run in read(path)}
  return [newest[r] for r in rows if r in newest]


def table(head, lines) -> str:
  """A Markdown table: the header `head` and the rendered `lines` ('| ... |')."""
  return '\n'.join(['| ' + ' | '.join(head) + ' |', '|' + '---|' * len(head), *lines])


def provenance(path: str, runs: Optional[list] = None) -> str:
  """The one-line note under a rendered table: artifact file, date, machine, commit (of
  `runs`, each counted once, or of every run of the artifact)."""
  runs = read(path) if runs is None else list({id(r): r for r in runs}.values())
  rel = os.path.relpath(_path(path), REPO)
  if not runs:
    return f'*No runs in `{rel}` yet.*'
  groups = []  # [note, runs]: consecutive runs with the same note are one entry.
  for r in runs:
    m = r.meta
    commit = (m.get('commit') or '')[:7] or 'not recorded'
    if m.get('dirty'):
      commit += ' with uncommitted changes'
    date = (m.get('date') or 'date not recorded')[:10]
    if m.get('recorded', True):
      note = f'{date}, {machine_text(m.get("machine"))}, commit {commit}'
    else:
      measured = f' measured {m["measured_on"][:10]},' if m.get('measured_on') else ''
      where = f' {machine_text(m["machine"])};' if m.get('machine') else ''
      note = (f'no meta block (recorded before artifacts kept one):{measured}{where} '
              f'file added in commit {commit} on {date}')
    if groups and groups[-1][0] == note:
      groups[-1][1] += 1
    else:
      groups.append([note, 1])
  notes = [note + (f' ({n} runs)' if n > 1 else '') for note, n in groups[-3:]]
  shown = sum(n for _, n in groups[-3:])
  more = f' (the latest {shown} of {len(runs)} runs)' if len(runs) > shown else ''
  return f'*From `{rel}`{more}: ' + '; '.join(notes) + '.*'


def row_arguments(doc: str, rows, json_path: str, extra=(), default=None) -> tuple:
  """(parser, arguments, chosen rows) of a goal script: --rows (comma-separated, of `rows`;
  `default` or all of them when not given), --keep DIR (keep the run directories), --json
  (the artifact to append to), and the `extra` arguments ((name, keyword arguments), ...);
  unknown rows are a usage error."""
  import argparse
  p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
  p.add_argument('--rows', default=','.join(default or rows),
                 help='comma-separated, of ' + ','.join(rows))
  for name, kwargs in extra:
    p.add_argument(name, **kwargs)
  p.add_argument('--keep', metavar='DIR', help='keep the run directories in DIR/<row>')
  p.add_argument('--json', default=json_path, help='the artifact each row is appended to')
  args = p.parse_args()
  chosen = [r.strip() for r in args.rows.split(',') if r.strip()]
  unknown = [r for r in chosen if r not in rows]
  if unknown:
    p.error(f'unknown rows {unknown} (known: {", ".join(rows)})')
  return p, args, chosen
