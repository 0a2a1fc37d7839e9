import { defaultProps, synthInference } from './util';

test('default P/D deployment: Llama-3.3-70B FP8 on p5en.48xlarge, prefill 2 x TP4, decode 2 x TP4', () => {
  // GIVEN the default configuration WHEN synthesized
  const { manifests } = synthInference(defaultProps());
  // THEN the manifests match the reviewed snapshot
  expect(manifests).toMatchSnapshot();
});
