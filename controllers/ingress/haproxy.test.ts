import { describe, expect, it } from 'vitest';
import { ingressThreads, parseBindFailures, renderConfig, type Route } from './haproxy.js';

describe('parseBindFailures', () => {
  it.each([
    // HAProxy 2.6's alerts, as Debian's binary prints them (test/integration/haproxy-bind.test.ts runs it).
    [
      ['[ALERT]    (27329) : Binding [/tmp/h.cfg:12] for frontend fe_b: cannot bind socket (Address already in use) for [127.0.0.1:18555]'],
      [{ frontend: 'fe_b', address: '127.0.0.1:18555', reason: 'Address already in use' }],
    ],
    [
      [
        '[NOTICE]   (1) : haproxy version is 2.6.12-1+deb12u4',
        '[ALERT]    (1) : Binding [/x/haproxy.cfg:15] for frontend fe_svc_d_c_http: cannot bind socket (Cannot assign requested address) for [ipv6@fd00::1:80]',
        '[ALERT]    (1) : Binding [/x/haproxy.cfg:15] for frontend fe_svc_d_c_http: cannot bind socket (Cannot assign requested address) for [ipv6@fd00::1:80]',
        '[ALERT]    (1) : [haproxy.main()] Some protocols failed to start their listeners! Exiting.',
      ],
      [{ frontend: 'fe_svc_d_c_http', address: 'ipv6@fd00::1:80', reason: 'Cannot assign requested address' }],
    ],
    [['[WARNING]  (3444) : Paused frontend fe_46249.', '[ALERT] (1) : some other alert'], []],
  ])('%j', (lines, want) => expect(parseBindFailures(lines)).toEqual(want));
});

describe('renderConfig with frontends left out', () => {
  it('drops their frontend and keeps their backend (the runtime API still addresses it)', () => {
    const r = (published: number): Route => ({ published, deployment: 'd', service: `s${published}`, portName: 'p', backend: `be_${published}`, mode: 'tcp' });
    const cfg = renderConfig({ socket: '/s', address: '127.0.0.1', routes: [r(80), r(81)], servers: new Map(), unbound: new Set(['fe_80']) });
    expect(cfg).not.toContain('frontend fe_80');
    expect(cfg).toContain('frontend fe_81');
    expect(cfg).toContain('backend be_80');
    expect(cfg).toContain('backend be_81');
  });
});

describe("the ingress's threads", () => {
  it.each([[1, 1], [2, 1], [3, 1], [4, 2], [16, 8]])('%i CPUs: %i', (cpus, threads) => expect(ingressThreads(cpus)).toBe(threads));

  it('are written as nbthread in the global section, and left to HAProxy when not given', () => {
    const at = (threads?: number) => renderConfig({ socket: '/s', address: '127.0.0.1', routes: [], servers: new Map(), ...(threads ? { threads } : {}) });
    expect(at(2).split('defaults')[0]).toContain('  nbthread 2\n');
    expect(at()).not.toContain('nbthread');
  });
});
