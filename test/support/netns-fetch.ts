// A GET from inside a network namespace (a node the test made): Node's own fetch, run there through
// nsenter. The demo busybox image's wget cannot be used for it on this machine (it segfaults even
// against 127.0.0.1), and a node's addresses answer only from inside the namespaces of its network.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { NETNS_DIR } from '../../src/supervise/local-network.js';

const run = promisify(execFile);
const SCRIPT = `fetch(process.argv[1], { signal: AbortSignal.timeout(Number(process.argv[2])) }).then(async (r) => process.stdout.write(r.status + '\\n' + (await r.text())), (e) => { console.error(String(e.cause ?? e)); process.exit(1); })`;

/** GET `url` from inside the namespace `netns` (its name under /run/netns): its status and body. Rejects when nothing answers. */
export async function getInNetns(netns: string, url: string, timeoutMs = 3000): Promise<{ status: number; body: string }> {
  const { stdout } = await run('nsenter', [`--net=${join(NETNS_DIR, netns)}`, '--', process.execPath, '-e', SCRIPT, url, String(timeoutMs)], { encoding: 'utf8', timeout: timeoutMs + 7000 });
  const nl = stdout.indexOf('\n');
  return { status: Number(stdout.slice(0, nl)), body: stdout.slice(nl + 1) };
}

/** The body of a 2xx answer to a GET from inside the namespace; rejects on any other answer. */
export async function textInNetns(netns: string, url: string, timeoutMs = 3000): Promise<string> {
  const r = await getInNetns(netns, url, timeoutMs);
  if (r.status < 200 || r.status > 299) throw new Error(`GET ${url} from namespace ${netns}: HTTP ${r.status}: ${r.body.slice(0, 200)}`);
  return r.body;
}
