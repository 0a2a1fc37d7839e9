import { gpuInstanceProps } from './util';
import { AcceleratedInstanceType } from '../../src';

describe('efaInterfacesFor', () => {
  test.each([
    // type, accelerators per pod, EFA interfaces expected
    ['p5en.48xlarge', 8, 16],
    ['p5en.48xlarge', 4, 8],
    ['p5en.48xlarge', 2, 4],
    ['p5en.48xlarge', 1, 2],
    ['p5.48xlarge', 8, 32],
    ['p5.48xlarge', 1, 4],
    ['p6-b200.48xlarge', 1, 1],
    ['p6-b200.48xlarge', 4, 4],
    ['p6e-gb200.36xlarge', 4, 4],
    ['p6e-gb200.36xlarge', 1, 1],
    ['trn2.48xlarge', 16, 16],
    ['trn2.48xlarge', 4, 4],
    ['trn1.32xlarge', 16, 8],
    ['trn1.32xlarge', 1, 1],
    ['p4d.24xlarge', 8, 4],
    ['p4d.24xlarge', 2, 1],
    ['p4d.24xlarge', 1, 1],
    ['p4de.24xlarge', 8, 4],
    ['p4de.24xlarge', 2, 1],
    ['p4de.24xlarge', 1, 1],
    ['g5.12xlarge', 4, 1],
    ['g5.48xlarge', 8, 1],
    ['g5.48xlarge', 1, 1],
    ['g6e.12xlarge', 4, 1],
    ['g6e.12xlarge', 1, 1],
    ['g6e.48xlarge', 8, 4],
  ] as Array<[string, number, number]>)('%s with %d devices per pod -> %d EFA', (name, accelerators, expected) => {
    // GIVEN a type and a pod size
    // WHEN the pod's EFA share is computed
    // THEN it is the proportional share, at least one
    expect(AcceleratedInstanceType.fromName(name).efaInterfacesFor(accelerators)).toBe(expected);
  });

  test('pods packed on one node never ask for more EFA than the node has', () => {
    for (const t of AcceleratedInstanceType.all()) {
      const total = t.efaInterfacesFor(t.acceleratorCount);
      for (let perPod = 1; perPod <= t.acceleratorCount; perPod++) {
        const pods = Math.floor(t.acceleratorCount / perPod);
        const share = t.efaInterfacesFor(perPod);
        // the floor share fits, except where one EFA per pod already exceeds the node (p4d with 1 GPU pods)
        if (share > 1) expect(pods * share).toBeLessThanOrEqual(total);
        // more devices never get fewer interfaces
        if (perPod > 1) expect(share).toBeGreaterThanOrEqual(t.efaInterfacesFor(perPod - 1));
      }
    }
  });

  test('a type without EFA gives 0', () => {
    expect(AcceleratedInstanceType.of(gpuInstanceProps({ maxEfaInterfaces: 0 })).efaInterfacesFor(8)).toBe(0);
  });

  test.each([0, 9, 1.5, -1])('rejects %p devices per pod on an 8-GPU type', (n) => {
    expect(() => AcceleratedInstanceType.P5EN_48XLARGE.efaInterfacesFor(n)).toThrow(
      new RegExp(`'accelerators' \\(${n}\\) must be an integer from 1 to 8, the devices of one p5en\\.48xlarge`),
    );
  });
});
