import { synthChart, wideEpProps } from './util';
import { ExpertParallelPool } from '../../src';

test('DeepSeek-V3 wide EP on p5en: 2 nodes x 8 H200 = EP16, per-rank endpoints, InferencePool', () => {
  // GIVEN the wide-EP configuration WHEN synthesized
  const { manifests } = synthChart(c => new ExpertParallelPool(c, 'DeepSeek', wideEpProps({
    redundantExperts: 32,
    inferencePool: { gateway: { name: 'inference-gateway' } },
  })));
  // THEN the manifests match the reviewed snapshot
  expect(manifests).toMatchSnapshot();
});
