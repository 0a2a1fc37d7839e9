import { cards, expectedLayout, gpuInstanceProps } from './util';
import { AcceleratedInstanceType, NetworkInterfaceType } from '../../src';

describe('networkInterfaceLayout', () => {
  test.each([
    // type, interfaces, efa-only cards besides card 0, efa-only on card 0 device 1
    ['p4d.24xlarge', 5, cards(1, 4), true],
    ['p4de.24xlarge', 5, cards(1, 4), true],
    ['p5.48xlarge', 33, cards(1, 32), true],
    ['p5e.48xlarge', 33, cards(1, 32), true],
    ['p5en.48xlarge', 17, cards(1, 16), true],
    ['p6-b200.48xlarge', 9, cards(1, 8), true],
    ['p6e-gb200.36xlarge', 5, [1, 5, 9, 13], false],
    ['trn1.32xlarge', 9, cards(1, 8), true],
    ['trn2.48xlarge', 17, cards(1, 16), true],
    ['trn2u.48xlarge', 17, cards(1, 16), true],
    ['g5.12xlarge', 2, [], true],
    ['g5.48xlarge', 2, [], true],
    ['g6e.12xlarge', 2, [], true],
    ['g6e.48xlarge', 5, cards(1, 4), true],
  ] as Array<[string, number, number[], boolean]>)('%s has %d interfaces in the EC2 layout', (name, count, efaCards, cardZero) => {
    // GIVEN a catalogued type
    const t = AcceleratedInstanceType.fromName(name);
    // WHEN its launch-template layout is computed
    const layout = t.networkInterfaceLayout();
    // THEN it has the expected number of interfaces, in the EC2 guide's order
    expect(layout).toHaveLength(count);
    expect(layout).toEqual(expectedLayout(efaCards, cardZero));
  });

  test.each(AcceleratedInstanceType.all().map(t => [t.name, t]))('%s: one primary ENA, no duplicate slot, EFA within limits', (_, t) => {
    const layout = t.networkInterfaceLayout();
    // exactly one plain ENA, and it is card 0 device 0
    const ena = layout.filter(s => s.interfaceType === NetworkInterfaceType.INTERFACE);
    expect(ena).toEqual([{ networkCardIndex: 0, deviceIndex: 0, interfaceType: NetworkInterfaceType.INTERFACE }]);
    // no (card, device) slot twice, every card in range
    const keys = layout.map(s => `${s.networkCardIndex}/${s.deviceIndex}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const s of layout) {
      expect(s.networkCardIndex).toBeGreaterThanOrEqual(0);
      expect(s.networkCardIndex).toBeLessThan(t.networkCards);
    }
    // EFA interfaces fit the type's maximum, and the whole node gets all of them
    const efa = layout.filter(s => s.interfaceType === NetworkInterfaceType.EFA_ONLY).length;
    expect(efa).toBeLessThanOrEqual(t.maxEfaInterfaces);
    expect(t.efaInterfacesFor(t.acceleratorCount)).toBe(efa);
  });

  test('p5.48xlarge: ENA card0/dev0, efa-only card0/dev1, efa-only cards 1..31 dev0', () => {
    const layout = AcceleratedInstanceType.P5_48XLARGE.networkInterfaceLayout();
    expect(layout[0]).toEqual({ networkCardIndex: 0, deviceIndex: 0, interfaceType: 'interface' });
    expect(layout[1]).toEqual({ networkCardIndex: 0, deviceIndex: 1, interfaceType: 'efa-only' });
    expect(layout.slice(2).map(s => s.networkCardIndex)).toEqual(cards(1, 32));
    expect(layout.slice(2).every(s => s.deviceIndex === 0 && s.interfaceType === 'efa-only')).toBe(true);
  });

  test('a type without EFA gets only the primary ENA', () => {
    const t = AcceleratedInstanceType.of(gpuInstanceProps({ maxEfaInterfaces: 0 }));
    expect(t.supportsEfa).toBe(false);
    expect(t.networkInterfaceLayout()).toEqual(expectedLayout([], false));
  });

  test('custom efa-only cards are sorted and card 0 follows the remaining EFA budget', () => {
    // GIVEN 8 cards, 3 EFA, two listed cards: one EFA left for card 0
    const t = AcceleratedInstanceType.of(gpuInstanceProps({ maxEfaInterfaces: 3, efaOnlyCards: [6, 2] }));
    expect(t.networkInterfaceLayout()).toEqual(expectedLayout([2, 6], true));
    // GIVEN the budget is used up by the listed cards: card 0 stays ENA-only
    const u = AcceleratedInstanceType.of(gpuInstanceProps({ maxEfaInterfaces: 2, efaOnlyCards: [2, 6] }));
    expect(u.networkInterfaceLayout()).toEqual(expectedLayout([2, 6], false));
  });
});

describe('default EFA cards', () => {
  test('a single EFA on a multi-card type goes to card 0', () => {
    // GIVEN 4 cards but only one EFA
    const t = AcceleratedInstanceType.of(gpuInstanceProps({ networkCards: 4, maxEfaInterfaces: 1 }));
    // THEN the default layout spends it on card 0 device 1
    expect(t.networkInterfaceLayout()).toEqual(expectedLayout([], true));
  });

  test('more EFA than cards still puts one per card', () => {
    const t = AcceleratedInstanceType.of(gpuInstanceProps({ networkCards: 2, maxEfaInterfaces: 4 }));
    expect(t.networkInterfaceLayout()).toEqual(expectedLayout([1], true));
  });
});
