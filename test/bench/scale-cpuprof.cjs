// CPU profile of the `jaco controller …`, `jaco agent …` and `jaco hollow-nodes` processes a bench starts.
// NODE_OPTIONS accepts --require but not --cpu-prof, so this preload starts V8's sampling profiler
// through node:inspector and writes <dir>/<controller|agent|hollow>-<pid>.cpuprofile at exit:
//   JACO_PROF_DIR=/tmp/prof NODE_OPTIONS="--require $PWD/test/bench/scale-cpuprof.cjs" \
//     SCALE_SCENARIOS=1,2 npx tsx test/bench/scale.bench.ts
// Read the profiles with test/bench/scale-profile.mjs. Other processes (the bench, the CLI) are left alone.
const argv = process.argv.join(' ');
const dir = process.env.JACO_PROF_DIR;
if (dir && / (controller|hollow-nodes|agent) /.test(argv)) {
  const inspector = require('node:inspector');
  const fs = require('node:fs');
  const session = new inspector.Session();
  session.connect();
  session.post('Profiler.enable');
  session.post('Profiler.setSamplingInterval', { interval: 1000 });
  session.post('Profiler.start');
  process.on('exit', () => {
    session.post('Profiler.stop', (err, r) => {
      if (!err) fs.writeFileSync(`${dir}/${/ controller /.test(argv) ? 'controller' : / agent /.test(argv) ? 'agent' : 'hollow'}-${process.pid}.cpuprofile`, JSON.stringify(r.profile));
    });
  });
}
