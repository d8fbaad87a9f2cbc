// Where jaco finds its store when nothing says otherwise. A module of its own so that what only
// prints them (`jaco --help`) does not load the etcd client.
export const DEFAULT_ENDPOINTS = 'http://127.0.0.1:2379';
export const DEFAULT_PREFIX = '/jaco/';
