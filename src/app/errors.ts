// The refusal the operator's tools report: one line and its exit code. The CLI prints it and exits
// with the code; the dashboard shows it as the action's result. Thrown by the acts of src/app (a
// node not found, a secret without the cluster key, …) and by the commands themselves.
import { EXIT_INVALID } from './exit-codes.js';

/** An error the CLI reports as one line, with its exit code. */
export class CliError extends Error {
  override name = 'CliError';
  constructor(message: string, readonly exitCode = EXIT_INVALID) {
    super(message);
  }
}
