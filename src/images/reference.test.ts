// Image references against Docker's own reference cases (distribution/reference: normalize_test.go,
// reference_test.go), read through ParseNormalizedNamed as `docker pull` reads them.
import { describe, expect, it } from 'vitest';
import { atRegistry, familiarString, formatReference, InvalidReferenceError, isRegistryHost, parseImageReference, parseRegistryHost, pinnedReference, registryApiHost, validateDigest } from './reference.js';

const D64 = 'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff';
const HEX = '1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a';

describe('parseImageReference: what Docker accepts, and how it normalises it', () => {
  // [input, registry, repository, tag, digest, shortName, canonical, familiar]
  const good: [string, string, string, string | undefined, string | undefined, boolean, string, string][] = [
    ['busybox', 'docker.io', 'library/busybox', undefined, undefined, true, 'docker.io/library/busybox', 'busybox'],
    ['busybox:1', 'docker.io', 'library/busybox', '1', undefined, true, 'docker.io/library/busybox:1', 'busybox:1'],
    ['jaco-demo/busybox:1', 'docker.io', 'jaco-demo/busybox', '1', undefined, true, 'docker.io/jaco-demo/busybox:1', 'jaco-demo/busybox:1'],
    ['docker.io/foo', 'docker.io', 'library/foo', undefined, undefined, false, 'docker.io/library/foo', 'foo'],
    ['docker.io/library/foo/bar', 'docker.io', 'library/foo/bar', undefined, undefined, false, 'docker.io/library/foo/bar', 'library/foo/bar'],
    ['index.docker.io/library/ubuntu-12.04-base', 'docker.io', 'library/ubuntu-12.04-base', undefined, undefined, false, 'docker.io/library/ubuntu-12.04-base', 'ubuntu-12.04-base'],
    ['index.docker.io/fooo/bar', 'docker.io', 'fooo/bar', undefined, undefined, false, 'docker.io/fooo/bar', 'fooo/bar'],
    ['store/foo/bar', 'docker.io', 'store/foo/bar', undefined, undefined, true, 'docker.io/store/foo/bar', 'store/foo/bar'],
    ['other/library', 'docker.io', 'other/library', undefined, undefined, true, 'docker.io/other/library', 'other/library'],
    ['test_com/foo', 'docker.io', 'test_com/foo', undefined, undefined, true, 'docker.io/test_com/foo', 'test_com/foo'],
    ['test.com/foo', 'test.com', 'foo', undefined, undefined, false, 'test.com/foo', 'test.com/foo'],
    ['test.com:8080/foo', 'test.com:8080', 'foo', undefined, undefined, false, 'test.com:8080/foo', 'test.com:8080/foo'],
    ['test-com:8080/foo', 'test-com:8080', 'foo', undefined, undefined, false, 'test-com:8080/foo', 'test-com:8080/foo'],
    ['xn--n3h.com:18080/foo', 'xn--n3h.com:18080', 'foo', undefined, undefined, false, 'xn--n3h.com:18080/foo', 'xn--n3h.com:18080/foo'],
    ['localhost/foo', 'localhost', 'foo', undefined, undefined, false, 'localhost/foo', 'localhost/foo'],
    ['localhost:5000/a/b:c', 'localhost:5000', 'a/b', 'c', undefined, false, 'localhost:5000/a/b:c', 'localhost:5000/a/b:c'],
    // "localhost:5000" with no slash is a Hub repository named localhost with tag 5000, as in Docker.
    ['localhost:5000', 'docker.io', 'library/localhost', '5000', undefined, true, 'docker.io/library/localhost:5000', 'localhost:5000'],
    ['test.com:5000', 'docker.io', 'library/test.com', '5000', undefined, true, 'docker.io/library/test.com:5000', 'test.com:5000'],
    ['127.0.0.1:5000/private/moonbase', '127.0.0.1:5000', 'private/moonbase', undefined, undefined, false, '127.0.0.1:5000/private/moonbase', '127.0.0.1:5000/private/moonbase'],
    ['192.168.1.1:5000/repo:5050', '192.168.1.1:5000', 'repo', '5050', undefined, false, '192.168.1.1:5000/repo:5050', '192.168.1.1:5000/repo:5050'],
    ['[2001:db8::1]:5000/repo:tag', '[2001:db8::1]:5000', 'repo', 'tag', undefined, false, '[2001:db8::1]:5000/repo:tag', '[2001:db8::1]:5000/repo:tag'],
    ['[::1]:5000/repo', '[::1]:5000', 'repo', undefined, undefined, false, '[::1]:5000/repo', '[::1]:5000/repo'],
    ['[2001:db8::1]/repo', '[2001:db8::1]', 'repo', undefined, undefined, false, '[2001:db8::1]/repo', '[2001:db8::1]/repo'],
    // An upper-case first component can only be a registry host (repository paths are lower case).
    ['Foo/bar', 'Foo', 'bar', undefined, undefined, false, 'Foo/bar', 'Foo/bar'],
    ['lowercase:Uppercase', 'docker.io', 'library/lowercase', 'Uppercase', undefined, true, 'docker.io/library/lowercase:Uppercase', 'lowercase:Uppercase'],
    ['b.gcr.io/test.example.com/my-app:test.example.com', 'b.gcr.io', 'test.example.com/my-app', 'test.example.com', undefined, false, 'b.gcr.io/test.example.com/my-app:test.example.com', 'b.gcr.io/test.example.com/my-app:test.example.com'],
    ['docker---rules/docker', 'docker.io', 'docker---rules/docker', undefined, undefined, true, 'docker.io/docker---rules/docker', 'docker---rules/docker'],
    ['dock__er/docker', 'docker.io', 'dock__er/docker', undefined, undefined, true, 'docker.io/dock__er/docker', 'dock__er/docker'],
    [`docker.io/${HEX}`, 'docker.io', `library/${HEX}`, undefined, undefined, false, `docker.io/library/${HEX}`, HEX],
    [`busybox:latest@sha256:${D64}`, 'docker.io', 'library/busybox', 'latest', `sha256:${D64}`, true, `docker.io/library/busybox:latest@sha256:${D64}`, `busybox:latest@sha256:${D64}`],
    [`redis@sha256:${D64}`, 'docker.io', 'library/redis', undefined, `sha256:${D64}`, true, `docker.io/library/redis@sha256:${D64}`, `redis@sha256:${D64}`],
    [`test:5000/repo:tag@sha256:${D64}`, 'test:5000', 'repo', 'tag', `sha256:${D64}`, false, `test:5000/repo:tag@sha256:${D64}`, `test:5000/repo:tag@sha256:${D64}`],
    [`xn--7o8h.com/myimage:xn--7o8h.com@sha512:${'f'.repeat(128)}`, 'xn--7o8h.com', 'myimage', 'xn--7o8h.com', `sha512:${'f'.repeat(128)}`, false, `xn--7o8h.com/myimage:xn--7o8h.com@sha512:${'f'.repeat(128)}`, `xn--7o8h.com/myimage:xn--7o8h.com@sha512:${'f'.repeat(128)}`],
    // 255 characters of name, registry included; the tag does not count.
    [`reg.io/${'a/'.repeat(123)}a:tag-puts-this-over-max`, 'reg.io', `${'a/'.repeat(123)}a`, 'tag-puts-this-over-max', undefined, false, `reg.io/${'a/'.repeat(123)}a:tag-puts-this-over-max`, `reg.io/${'a/'.repeat(123)}a:tag-puts-this-over-max`],
  ];
  it.each(good)('%s', (input, registry, repository, tag, digest, shortName, canonical, familiar) => {
    const ref = parseImageReference(input);
    expect(ref).toEqual({ registry, repository, ...(tag ? { tag } : {}), ...(digest ? { digest } : {}), shortName });
    expect(formatReference(ref)).toBe(canonical);
    expect(familiarString(ref)).toBe(familiar);
    // The canonical form reads back as itself (only its shortness differs).
    expect(parseImageReference(canonical)).toEqual({ ...ref, shortName: false });
  });

  // [input, Docker's reason]
  const bad: [string, string][] = [
    ['', 'repository name must have at least one component'],
    [':justtag', 'invalid reference format'],
    [`@sha256:${D64}`, 'invalid reference format'],
    [HEX, `invalid repository name (${HEX}), cannot specify 64-byte hexadecimal strings`],
    ['https://github.com/docker/docker', 'invalid reference format'],
    ['docker/Docker', 'invalid reference format: repository name (docker/Docker) must be lowercase'],
    ['Uppercase:tag', 'invalid reference format: repository name (library/Uppercase) must be lowercase'],
    ['test:5000/Uppercase/lowercase:tag', 'invalid reference format: repository name (Uppercase/lowercase) must be lowercase'],
    ['-docker', 'invalid reference format'],
    ['-docker/docker', 'invalid reference format'],
    ['docker-/docker', 'invalid reference format'],
    ['-docker.io/docker/docker', 'invalid reference format'],
    ['docker///docker', 'invalid reference format'],
    ['docker.io/docker///docker', 'invalid reference format'],
    ['____/____', 'invalid reference format'],
    ['_docker/_docker', 'invalid reference format'],
    ['dock..er/docker', 'invalid reference format'],
    ['dock_.er/docker', 'invalid reference format'],
    ['dock-.er/docker', 'invalid reference format'],
    ['docker/', 'invalid reference format'],
    ['aa/asdf$$^/aa', 'invalid reference format'],
    ['foo:-bar', 'invalid reference format'],
    [`foo:${'a'.repeat(129)}`, 'invalid reference format'],
    [`${'a/'.repeat(128)}a:tag`, 'repository name must not be more than 255 characters'],
    [`reg.io/${'a/'.repeat(124)}a`, 'repository name must not be more than 255 characters'],
    // A short name is counted with the docker.io/ it stands for.
    [`${'a/'.repeat(123)}a`, 'repository name must not be more than 255 characters'],
    ['[2001:db8::1]', 'invalid reference format'],
    ['[2001:db8::1]:5000', 'invalid reference format'],
    ['[fe80::1%eth0]:5000/repo', 'invalid reference format'],
    ['repo@sha256:ffffffffffffffffffffffffffffffffff', 'invalid checksum digest length'],
    [`validname@invaliddigest:${D64}`, 'unsupported digest algorithm'],
    // go-digest accepts only lower-case hex.
    [`repo@sha256:${D64.toUpperCase()}`, 'invalid checksum digest format'],
    ['repo@sha256', 'invalid reference format'],
  ];
  it.each(bad)('refuses %j: %s', (input, reason) => {
    let err: unknown;
    try {
      parseImageReference(input);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(InvalidReferenceError);
    expect((err as InvalidReferenceError).reason).toBe(reason);
    expect((err as Error).message).toBe(`invalid image reference ${JSON.stringify(input)}: ${reason}`);
    expect((err as Error).name).toBe('InvalidReferenceError');
  });
});

describe('registry hosts, digests, pinning', () => {
  it.each([
    ['127.0.0.1:5000', true],
    ['registry.example.com', true],
    ['[fd00::1]:5000', true],
    ['localhost', true],
    ['ghcr.io', true],
    ['https://ghcr.io', false],
    ['ghcr.io/', false],
    ['host:port', false],
    ['', false],
    ['-bad.example.com', false],
  ])('isRegistryHost(%j) is %s', (s, ok) => expect(isRegistryHost(s)).toBe(ok));

  it('normalises a typed registry host (Hub has one name) and refuses a URL', () => {
    expect(parseRegistryHost('Registry.Example.COM:443')).toBe('registry.example.com:443');
    expect(parseRegistryHost('index.docker.io')).toBe('docker.io');
    expect(parseRegistryHost('registry-1.docker.io')).toBe('docker.io');
    expect(() => parseRegistryHost('https://ghcr.io')).toThrow(/not a registry host/);
  });

  it('validates digests as go-digest does', () => {
    expect(validateDigest(`sha256:${D64}`)).toBe(`sha256:${D64}`);
    expect(() => validateDigest('sha256:abc')).toThrow('invalid checksum digest length');
    expect(() => validateDigest(`md5:${'f'.repeat(32)}`)).toThrow('unsupported digest algorithm');
    expect(() => validateDigest(D64)).toThrow('invalid checksum digest format');
  });

  it('pins a reference to a digest, keeping its tag (latest when none) for people to read', () => {
    expect(pinnedReference(parseImageReference('127.0.0.1:5000/app:1'), `sha256:${D64}`)).toBe(`127.0.0.1:5000/app:1@sha256:${D64}`);
    expect(pinnedReference(parseImageReference('127.0.0.1:5000/app'), `sha256:${D64}`)).toBe(`127.0.0.1:5000/app:latest@sha256:${D64}`);
    expect(() => pinnedReference(parseImageReference('a.b/app'), 'sha256:nope')).toThrow(InvalidReferenceError);
  });

  it('re-homes a short name at a registry as the operator would tag it', () => {
    expect(formatReference(atRegistry(parseImageReference('jaco-demo/busybox:1'), '127.0.0.1:5000'))).toBe('127.0.0.1:5000/jaco-demo/busybox:1');
    expect(formatReference(atRegistry(parseImageReference('redis:7'), 'reg.local'))).toBe('reg.local/redis:7');
    // library/redis is redis to Docker: the same image, the same new home.
    expect(formatReference(atRegistry(parseImageReference('library/redis:7'), 'reg.local'))).toBe('reg.local/redis:7');
    expect(formatReference(atRegistry(parseImageReference('library/a/b'), 'reg.local'))).toBe('reg.local/library/a/b');
    expect(atRegistry(parseImageReference('redis'), 'reg.local').shortName).toBe(false);
  });

  it("names Docker Hub's API host, and every other registry as itself", () => {
    expect(registryApiHost('docker.io')).toBe('registry-1.docker.io');
    expect(registryApiHost('127.0.0.1:5000')).toBe('127.0.0.1:5000');
  });
});
