// jaco's exit codes (docs/cli.md): a module of its own so that the program's entry point does not
// load what the commands need.
export const EXIT_OK = 0;
/** Invalid input or usage, a refusal, a failed command. */
export const EXIT_INVALID = 1;
/** The store could not be reached. */
export const EXIT_UNREACHABLE = 2;
