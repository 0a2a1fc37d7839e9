import { Size } from 'cdk8s';
import { defaultProps, synthChart } from './util';
import { DisaggregatedInference, KvCacheBackend, KvStoreEndpoint, KvTier, TieredKvCache } from '../../src';

const host = (gib: number) => KvTier.hostMemory(Size.gibibytes(gib));
const nvme = (gib: number) => KvTier.localNvme(Size.gibibytes(gib));
const store = (memory: number, disk?: number) => KvTier.remote(KvStoreEndpoint.engineKvStore({
  image: 'slim', memory: Size.gibibytes(memory), disk: disk === undefined ? undefined : Size.gibibytes(disk),
}));

/** Builds a default P/D deployment and attaches a cache of these tiers to its decode pool. */
function attach(tiers: KvTier[], backend?: KvCacheBackend, twice = false) {
  return synthChart(c => {
    const inference = new DisaggregatedInference(c, 'Llama', defaultProps());
    const cache = new TieredKvCache(c, 'Cache', { tiers, backend }).attachTo(inference.decode);
    if (twice) {
      new TieredKvCache(c, 'Other', { tiers }).attachTo(inference.decode);
    }
    return cache;
  });
}

describe('TieredKvCache errors name the prop, the value and a fix', () => {
  test.each([
    ['no tiers', [], undefined, /'tiers' is empty; add KvTier.hostMemory/],
    ['two tiers of a kind', [host(500), host(600)], undefined, /'tiers' has two hostMemory tiers/],
    ['out of order', [host(500), store(4000), nvme(2000)], undefined, /'tiers' lists localNvme after remote; order them fastest first/],
    ['no host tier first', [nvme(2000)], undefined, /'tiers' starts with localNvme; every transfer is staged through host memory/],
    ['native with a disk tier', [host(500), nvme(2000)], KvCacheBackend.NATIVE, /'backend' \(native\) keeps offloaded blocks in host memory only in vLLM 0.19, but 'tiers' has localNvme; use KvCacheBackend.LMCACHE/],
    ['a lower tier smaller than the one above', [host(500), nvme(300)], undefined, /'localNvme' \(300 GiB\) is smaller than the hostMemory tier above it \(500 GiB\).*at least 500 GiB/],
    ['a remote store smaller than the disk tier', [host(500), nvme(2000), store(64, 1000)], undefined, /'remote' \(1064 GiB\) is smaller than the localNvme tier above it \(2000 GiB\)/],
    ['host tier below the HBM KV cache', [host(100)], undefined, /'hostMemory' \(100 GiB\) is smaller than the 431.6 GiB of KV cache a pod holds in accelerator memory; .*use at least 432 GiB/],
    ['host tier beyond the pod\'s RAM', [host(1000)], undefined,
      /'hostMemory' \(1000 GiB\) plus vLLM's working set \(32 GiB\) and \/dev\/shm \(32 GiB\) exceeds the 972 GiB a pod of 4 accelerators may use on p5en.48xlarge .*; use at most 908 GiB/],
    ['disk tier beyond the pod\'s NVMe', [host(500), nvme(20000)], undefined,
      /'localNvme' \(20000 GiB\) exceeds the \d+ GiB of instance-store NVMe a pod may fill on p5en.48xlarge \(its share of 8 x 3800 GB less a 10% reserve and the model cache\); use at most \d+ GiB/],
  ])('%s', (_name, tiers, backend, message) => {
    // GIVEN bad tiers WHEN built and attached THEN it throws naming the prop
    expect(() => attach(tiers as KvTier[], backend as KvCacheBackend | undefined)).toThrow(message);
  });

  test('one cache per pool', () => {
    // GIVEN two caches on the decode pool WHEN attached THEN
    expect(() => attach([host(500)], undefined, true)).toThrow(/a KV cache \(test\/Cache\) is attached already; attach one TieredKvCache per pool/);
  });

  test('factories reject malformed input', () => {
    // GIVEN WHEN THEN
    expect(() => KvTier.hostMemory(Size.gibibytes(0))).toThrow(/'KvTier.hostMemory' size \(0 GiB\) must be positive/);
    expect(() => KvStoreEndpoint.redis('http://redis:6379')).toThrow(/'redis' url \('http:\/\/redis:6379'\) must be 'redis:\/\/host:port'/);
    expect(() => KvStoreEndpoint.engineKvStore({ image: 'x', memory: Size.mebibytes(512) })).toThrow(/'engineKvStore.memory' \(0.5 GiB\) must be at least 1 GiB/);
    expect(() => KvStoreEndpoint.engineKvStore({ image: 'x', memory: Size.gibibytes(8), cpu: 0 })).toThrow(/'engineKvStore.cpu' \(0\) must be a positive number/);
    expect(() => new TieredKvCache(synthChart(() => 0).chart, 'C', { tiers: [host(500), store(600)], name: 'KV Store' }))
      .toThrow(/'name' \('KV Store'\) must be a DNS label/);
  });

  test('addEnv rejects a malformed variable name', () => {
    // GIVEN WHEN THEN
    expect(() => synthChart(c => new DisaggregatedInference(c, 'L', defaultProps()).decode.addEnv('MY VAR', 'x'))).toThrow(/addEnv name \('MY VAR'\)/);
  });
});
