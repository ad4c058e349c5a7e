"""launch/_compilation_cache.py: where the launchers' persistent compilation cache lives, and that a second
process loads what the first compiled. Each case runs in a fresh interpreter (JAX fixes its cache at the
first compile, and this process's is the suite's)."""
import json
import os
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Resolves the directory for one command line (argv[1:]) and prints what `enable` set, as JSON.
_RESOLVE = textwrap.dedent("""
    import json, sys
    from absl import flags
    from launch import _compilation_cache
    flags.FLAGS(['prog'] + sys.argv[1:])
    import jax
    directory = _compilation_cache.enable()
    print(json.dumps({'directory': directory,
                      'enabled': jax.config.jax_enable_compilation_cache,
                      'config_dir': jax.config.jax_compilation_cache_dir,
                      'max_size': jax.config.jax_compilation_cache_max_size}))
""")

# Compiles one program that takes a while (a 60-step unrolled loop, every compile written: min time 0)
# and prints the number of persistent-cache hits JAX reported.
_COMPILE = textwrap.dedent("""
    import json, sys
    from absl import flags
    from launch import _compilation_cache
    flags.FLAGS(['prog'] + sys.argv[1:])
    import jax, jax.numpy as jnp
    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **kw: hits.append(event) if event == '/jax/compilation_cache/cache_hits' else None)
    _compilation_cache.enable()
    jax.config.update('jax_persistent_cache_min_compile_time_secs', 0)
    def f(x):
      for _ in range(60):
        x = jnp.tanh(x @ x.T) + 1.0
      return x.sum()
    value = float(jax.jit(f)(jnp.ones((8, 8))))
    print(json.dumps({'hits': len(hits), 'value': value}))
""")


def _run(script, args, env_updates):
  env = dict(os.environ)
  for key, value in env_updates.items():
    if value is None:
      env.pop(key, None)
    else:
      env[key] = value
  proc = subprocess.run([sys.executable, '-c', script, *args], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=300, check=False)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_a_second_process_loads_the_program_the_first_compiled(tmp_path):
  cache = tmp_path / 'cache'
  first, _ = _run(_COMPILE, [f'--compilation_cache_dir={cache}'], {})
  entries = [p.name for p in cache.iterdir() if p.name.endswith('-cache')]
  assert first['hits'] == 0 and entries, (first, sorted(os.listdir(cache)))
  second, _ = _run(_COMPILE, [f'--compilation_cache_dir={cache}'], {})
  assert second['hits'] >= 1 and second['value'] == first['value']
  # Turned off: nothing loaded, nothing written.
  off, _ = _run(_COMPILE, ['--compilation_cache_dir='], {})
  assert off['hits'] == 0 and off['value'] == first['value']
  assert sorted(p.name for p in cache.iterdir() if p.name.endswith('-cache')) == sorted(entries)


def test_the_directory_is_the_flag_then_jax_variable_then_xdg_cache(tmp_path):
  xdg = {'XDG_CACHE_HOME': str(tmp_path / 'xdg'), 'JAX_COMPILATION_CACHE_DIR': None,
         'JAX_COMPILATION_CACHE_MAX_SIZE': None}
  default, _ = _run(_RESOLVE, [], xdg)
  assert default['directory'] == str(tmp_path / 'xdg' / 'jax_structured' / 'xla')
  assert default['config_dir'] == default['directory'] and default['enabled']
  assert default['max_size'] == 4 * 1024 ** 3  # capped (filelock is a requirement)
  assert (tmp_path / 'xdg' / 'jax_structured' / 'xla').is_dir()
  from_jax, _ = _run(_RESOLVE, [], dict(xdg, JAX_COMPILATION_CACHE_DIR=str(tmp_path / 'jaxvar')))
  # A folder the user names keeps JAX's own size setting (uncapped by default): JAX's capped writers
  # fail on entries an uncapped one wrote.
  assert from_jax['directory'] == str(tmp_path / 'jaxvar') and from_jax['max_size'] == -1
  from_flag, _ = _run(_RESOLVE, [f'--compilation_cache_dir={tmp_path / "flag"}'],
                      dict(xdg, JAX_COMPILATION_CACHE_DIR=str(tmp_path / 'jaxvar')))
  assert from_flag['directory'] == str(tmp_path / 'flag') and from_flag['max_size'] == -1
  off, _ = _run(_RESOLVE, ['--compilation_cache_dir='], xdg)
  assert off['directory'] is None and not off['enabled']


def test_an_unusable_default_directory_warns_and_compiles_without_a_cache(tmp_path):
  (tmp_path / 'file').write_text('not a folder')
  result, stderr = _run(_RESOLVE, [], {'XDG_CACHE_HOME': str(tmp_path / 'file'),
                                       'JAX_COMPILATION_CACHE_DIR': None})
  assert result['directory'] is None and not result['enabled']
  assert 'no compilation cache' in stderr and '--compilation_cache_dir=DIR' in stderr
