import { AcceleratedInstanceType } from '../../src/catalog';
import { defaultProps, synthInference } from '../k8s/util';

const P5EN = AcceleratedInstanceType.P5EN_48XLARGE;

describe('EFA interface counts that split evenly over a pod', () => {
  test.each([
    // [type, accelerators per pod, valid counts]
    ['p5en.48xlarge', 8, [1, 2, 4, 8, 16]],
    ['p5en.48xlarge', 4, [1, 2, 4, 8]],
    ['p5en.48xlarge', 1, [1, 2]],
    ['p5.48xlarge', 8, [1, 2, 4, 8, 16, 24, 32]],
    ['p4d.24xlarge', 8, [1, 2, 4]],
    ['trn1.32xlarge', 16, [1, 2, 4, 8]],
    ['g6e.12xlarge', 4, [1]],
  ])('%s with %i accelerators per pod: %j', (name, accelerators, expected) => {
    // GIVEN a catalogued type WHEN asked THEN only even shares are offered
    expect(AcceleratedInstanceType.fromName(name as string).efaInterfaceChoices(accelerators as number)).toEqual(expected);
  });

  test('the default share is always a choice', () => {
    // GIVEN every catalogued type and pod size WHEN asked THEN the default share is among the choices
    for (const t of AcceleratedInstanceType.all()) {
      for (let perPod = 1; perPod <= t.acceleratorCount; perPod++) {
        const share = t.efaInterfacesFor(perPod);
        if (share > 0) expect(t.efaInterfaceChoices(perPod)).toContain(share);
      }
    }
  });

  test('p5en with 3 EFA interfaces per whole-node pod is rejected with the valid counts', () => {
    // GIVEN a decode pool of TP 8 on p5en asking for 3 interfaces
    const props = defaultProps({ decode: { instanceType: P5EN, tensorParallel: 8, efaInterfaces: 3 } } as any);
    // WHEN built THEN the error names the prop, the value and the valid counts
    expect(() => synthInference(props)).toThrow(
      /'decode.efaInterfaces' \(3\) does not split evenly over the 8 accelerators of each pod on p5en.48xlarge; use 1, 2, 4, 8, 16 \(or 0 for none\), or omit it for 16/);
  });

  test('an even explicit count and 0 are accepted', () => {
    // GIVEN TP 8 pods asking for 8, then 0, interfaces WHEN built THEN no error
    expect(() => synthInference(defaultProps({ decode: { instanceType: P5EN, tensorParallel: 8, efaInterfaces: 8 } } as any))).not.toThrow();
    expect(() => synthInference(defaultProps({ decode: { instanceType: P5EN, tensorParallel: 8, efaInterfaces: 0 } } as any))).not.toThrow();
  });
});
