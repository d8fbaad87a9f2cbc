// A decide in steps (runner.ts ControllerSpec.decideSteps) is a generator that yields each
// step's acts and returns the whole result; run to its end at once, it is the plain decide.

/** Runs a decide in steps to its end and returns its result (what decide returns). */
export function allSteps<R>(steps: Generator<unknown, R, void>): R {
  for (;;) {
    const s = steps.next();
    if (s.done) return s.value;
  }
}
