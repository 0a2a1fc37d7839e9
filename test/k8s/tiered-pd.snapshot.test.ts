import { tieredPdChart } from './util';

test('Llama-3.3-70B P/D on p5en with host memory, local NVMe and kvstore tiers on the decode pool', () => {
  // GIVEN the tiered configuration WHEN synthesized
  const { manifests } = tieredPdChart();
  // THEN the manifests match the reviewed snapshot
  expect(manifests).toMatchSnapshot();
});
