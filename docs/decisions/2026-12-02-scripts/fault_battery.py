"""The fault battery of issue 50 on configs/liu_lapata/sst_binary.py:simple,tiny (200 steps, a checkpoint
every 20, dev every 50): each fault, its exit status, the last line printed, the step the next launch
resumed from, and whether the final metrics equal an uninterrupted run's.

  OPENBLAS_NUM_THREADS=1 python docs/decisions/2026-12-02-scripts/fault_battery.py /tmp/battery

Prints a Markdown table. Needs ../shared/data/sst; the full-disk row needs `mount -t tmpfs` (root).
"""
import json
import pathlib
import re
import shutil
import signal
import subprocess
import sys

from jax_structured.training import metrics as metrics_lib

REPO = pathlib.Path(__file__).resolve().parents[3]
COMMAND = [sys.executable, '-m', 'launch.train', '--config=configs/liu_lapata/sst_binary.py:simple,tiny',
           '--config.train.num_steps=200', '--config.train.checkpoint_every_steps=20',
           '--config.train.eval_every_steps=50', '--config.train.log_every_steps=10']
COMPARED = ('validation', 'test', 'best_step', 'steps')


def launch(workdir, *extra):
  return subprocess.Popen(COMMAND + [f'--workdir={workdir}', *extra], cwd=REPO, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for_step(process, step, lines):
  """Reads the run's output until its progress line reaches `step`."""
  for line in process.stdout:
    lines.append(line.rstrip())
    found = re.match(r'step (\d+)/', line)
    if found and int(found.group(1)) >= step:
      return


def finish(process, lines):
  for line in process.stdout:
    lines.append(line.rstrip())
  return process.wait()


def run(workdir, *extra):
  process, lines = launch(workdir, *extra), []
  rc = finish(process, lines)
  return rc, lines


def last(lines):
  kept = [l for l in lines if l.strip() and 'Event loop is closed' not in l]
  return kept[-1][:160] if kept else ''


def latest_checkpoint(workdir):
  """The newest checkpoint step in `workdir` (what a relaunch resumes from when it is good)."""
  steps = [int(p.name) for p in (pathlib.Path(workdir) / 'checkpoints').glob('*') if p.name.isdigit()]
  return max(steps, default='-')


def resumed_from(lines):
  for line in lines:
    found = re.search(r'resumed from the checkpoint of step (\d+)', line)
    if found:
      return found.group(1)
  return '-'


def metrics(workdir):
  path = pathlib.Path(workdir) / 'metrics.json'
  if not path.exists():
    return None
  saved = json.loads(path.read_text())
  return {k: saved.get(k) for k in COMPARED}


def unique_history(workdir):
  seen, duplicates = {}, 0
  for event in metrics_lib.read_events(workdir):
    if event.HasField('session_log') and event.session_log.status == 1:  # START: TensorBoard purges
      for tag in seen:
        seen[tag] = {s for s in seen[tag] if s < event.step}
      continue
    for value in event.summary.value:
      steps = seen.setdefault(value.tag, set())
      duplicates += event.step in steps
      steps.add(event.step)
  train = seen.get('train/loss', set())  # a stop by a signal also logs the steps since the last line
  return duplicates == 0 and set(range(10, 201, 10)) <= train


def on_tmpfs(folder, options, name):
  """The row of a run whose workdir is on a fresh tmpfs mounted with `options` (none without root)."""
  folder.mkdir()
  if subprocess.run(['mount', '-t', 'tmpfs', '-o', options, 'tmpfs', str(folder)]).returncode != 0:
    return []
  try:
    rc, lines = run(folder / 'w')
    return [(name, rc, last(lines), '-', '-', '-')]
  finally:
    subprocess.run(['umount', str(folder)])


def main(root):
  root = pathlib.Path(root)
  shutil.rmtree(root, ignore_errors=True)
  root.mkdir(parents=True)
  rows = []
  rc, lines = run(root / 'reference')
  reference = metrics(root / 'reference')
  rows.append(('none (reference)', rc, last(lines), '-', 'yes', unique_history(root / 'reference')))

  # Two launches on one workdir.
  first, first_lines = launch(root / 'busy'), []
  wait_for_step(first, 10, first_lines)
  rc, lines = run(root / 'busy')
  rc_first = finish(first, first_lines)
  rows.append(('second launch on a busy workdir', rc, last(lines), '-',
               f'first run rc {rc_first}, equal: {metrics(root / "busy") == reference}', '-'))

  for name, sig, code in (('SIGINT at step 70', signal.SIGINT, 130), ('SIGTERM at step 70', signal.SIGTERM, 143),
                          ('kill -9 at step 70', signal.SIGKILL, -9)):
    workdir = root / name.split()[0].replace('-', '')
    process, lines = launch(workdir), []
    wait_for_step(process, 70, lines)
    process.send_signal(sig)
    rc = finish(process, lines)
    start = latest_checkpoint(workdir)
    rc2, lines2 = run(workdir)
    rows.append((name, rc, last(lines), start, f'{metrics(workdir) == reference} (rc {rc2})',
                 unique_history(workdir)))

  # A damaged latest checkpoint: its array files truncated.
  workdir = root / 'damaged'
  process, lines = launch(workdir), []
  wait_for_step(process, 70, lines)
  process.send_signal(signal.SIGKILL)
  finish(process, lines)
  latest = max((p for p in (workdir / 'checkpoints').iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
  for path in latest.rglob('*'):
    if path.is_file() and path.parent.name == 'd':  # the OCDBT array data files
      path.write_bytes(path.read_bytes()[:16])
  rc, lines = run(workdir)
  moved = [l for l in lines if 'moved it to' in l]
  rows.append((f'latest checkpoint ({latest.name}) truncated', rc, (moved or [last(lines)])[0][:160],
               resumed_from(lines), metrics(workdir) == reference, unique_history(workdir)))

  # A file where the workdir must be.
  target = root / 'a_file'
  target.write_text('x')
  rc, lines = run(target)
  rows.append(('a file given as --workdir', rc, last(lines), '-', '-', '-'))

  # A full disk (a 400 KiB tmpfs) and a read-only file system.
  for name, options in (('disk full (400 KiB tmpfs)', 'size=400k'), ('read-only file system', 'ro,size=1m')):
    rows += on_tmpfs(root / options.split(',')[0].replace('=', ''), options, name)

  print('| fault | exit status | last line (or the damage line) | resumed from step | metrics equal | '
        'event history complete and unique |')
  print('|---|---:|---|---:|---|---|')
  for row in rows:
    print('| ' + ' | '.join(str(c).replace('|', '/') for c in row) + ' |')


if __name__ == '__main__':
  main(sys.argv[1])
