import { Size } from 'cdk8s';
import { reportSkipped, synthChart, tieredPdChart, validateManifests, wideEpProps, deepseekEpPdProps } from './util';
import { DataParallelEndpoints, DisaggregatedInference, ExpertParallelPool, GatewayExposure, KvTier, TieredKvCache } from '../../src';

describe('expert-parallel and tiered-cache objects validate against their schemas', () => {
  test.each([
    ['DeepSeek-V3 EP16 per-rank with an InferencePool', () => synthChart(c => new ExpertParallelPool(c, 'Ds', wideEpProps({
      inferencePool: { gateway: { name: 'gw', namespace: 'gateways' }, endpointPickerService: 'epp' }, redundantExperts: 32,
    }))).manifests],
    ['DeepSeek-V3 EP16 single endpoint with a native host tier', () => synthChart(c => {
      const pool = new ExpertParallelPool(c, 'Ds', wideEpProps({ endpoints: DataParallelEndpoints.SINGLE }));
      new TieredKvCache(c, 'Cache', { tiers: [KvTier.hostMemory(Size.gibibytes(800))] }).attachTo(pool);
    }).manifests],
    ['Llama-3.3-70B P/D with host, NVMe and kvstore tiers', () => tieredPdChart().manifests],
    ['DeepSeek-V3 P/D with an EP decode side behind an InferencePool', () => synthChart(c => new DisaggregatedInference(c, 'Ds',
      deepseekEpPdProps({}, { gateway: GatewayExposure.inferencePool({ gateway: { name: 'gw' } }) }))).manifests],
    ['DeepSeek-V3 P/D with a per-rank EP decode side behind the router', () => synthChart(c => new DisaggregatedInference(c, 'Ds',
      deepseekEpPdProps({ endpoints: DataParallelEndpoints.PER_RANK }))).manifests],
  ])('%s', (_name, build) => {
    // GIVEN a configuration WHEN synthesized
    const manifests = build();
    // THEN every object passes its schema
    const result = validateManifests(manifests);
    reportSkipped(result);
    expect(result.errors).toEqual([]);
    expect(manifests.length).toBeGreaterThan(3);
  });
});
