// The etcd wire shapes the store speaks (key-values, compares, request ops, watch responses, a
// watcher), re-exported so code outside src/store — the simulation's in-memory etcd, the chaos
// checker that reads raw revisions, the tests of raw watches — names them without importing the
// etcd3 client itself.
export { CompareResult, CompareTarget, type ICompare, type IKeyValue, type IRequestOp, type IResponseHeader, type IWatchResponse, type Watcher } from 'etcd3';
