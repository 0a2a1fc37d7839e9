import { AcceleratedInstanceType, Accelerator, AcceleratorProps, AcceleratorVendor, Precision } from '../../src';

const base: AcceleratorProps = {
  name: 'X1',
  vendor: AcceleratorVendor.NVIDIA,
  memoryGib: 64,
  hbmBandwidthGBps: 2000,
  peakTflopsBf16: 400,
  interconnectGBps: 100,
  interconnect: 'PCIe Gen5',
};

describe('Accelerator', () => {
  test('every catalogued accelerator validates and has sane numbers', () => {
    for (const a of [...Accelerator.all(), ...Accelerator.outsideEc2()]) {
      // GIVEN a catalogued accelerator rebuilt through the public factory
      const copy = Accelerator.of({
        name: a.name,
        vendor: a.vendor,
        memoryGib: a.memoryGib,
        hbmBandwidthGBps: a.hbmBandwidthGBps,
        peakTflopsBf16: a.peakTflops(Precision.BF16),
        interconnectGBps: a.interconnectGBps,
        interconnect: a.interconnect,
      });
      // THEN the copy has the same BF16 rate and memory
      expect(copy.peakTflops(Precision.BF16)).toBe(a.peakTflops(Precision.BF16));
      expect(a.memoryGib).toBeGreaterThan(0);
      // AND narrower formats are never slower than wider ones
      expect(a.peakTflops(Precision.FP8)).toBeGreaterThanOrEqual(a.peakTflops(Precision.BF16));
      expect(a.peakTflops(Precision.FP4)).toBeGreaterThanOrEqual(a.peakTflops(Precision.BF16));
      expect(a.peakTflops(Precision.INT4)).toBe(a.peakTflops(Precision.BF16));
      expect(a.peakTflops(Precision.FP16)).toBe(a.peakTflops(Precision.BF16));
    }
  });

  test('names are unique', () => {
    const names = [...Accelerator.all(), ...Accelerator.outsideEc2()].map(a => a.name);
    expect(new Set(names).size).toBe(names.length);
  });

  test('all() is what some EC2 instance type carries; outsideEc2() is what none does', () => {
    // The sizing suggests a bigger device from all(): it must name one AWS sells.
    const carried = new Set(AcceleratedInstanceType.all().map(t => t.accelerator));
    for (const a of Accelerator.all()) expect(carried.has(a)).toBe(true);
    for (const a of Accelerator.outsideEc2()) expect(carried.has(a)).toBe(false);
    expect(Accelerator.outsideEc2().map(a => a.name)).toEqual(['A10', 'H800', 'H20']);
  });

  test('precisions a device cannot multiply run weight-only at the BF16 rate (INT8 at FP8)', () => {
    // H100 has no FP4: vLLM keeps MXFP4 weight-only, so the math runs at the BF16 rate
    expect(Accelerator.H100.supportsNativePrecision(Precision.FP4)).toBe(false);
    expect(Accelerator.H100.peakTflops(Precision.FP4)).toBe(Accelerator.H100.peakTflops(Precision.BF16));
    // INT4 (AWQ / GPTQ) is weight-only everywhere
    expect(Accelerator.H100.peakTflops(Precision.INT4)).toBe(Accelerator.H100.peakTflops(Precision.BF16));
    // A100 has no FP8: FP8 runs at the BF16 rate
    expect(Accelerator.A100_40GB.supportsNativePrecision(Precision.FP8)).toBe(false);
    expect(Accelerator.A100_40GB.peakTflops(Precision.FP8)).toBe(Accelerator.A100_40GB.peakTflops(Precision.BF16));
    // Trainium2 has no INT8 rate: INT8 runs at the FP8 rate
    expect(Accelerator.TRAINIUM2.peakTflops(Precision.INT8)).toBe(Accelerator.TRAINIUM2.peakTflops(Precision.FP8));
  });

  test('Blackwell runs FP4 natively at twice its FP8 rate', () => {
    for (const a of [Accelerator.B200, Accelerator.GB200]) {
      expect(a.supportsNativePrecision(Precision.FP4)).toBe(true);
      expect(a.peakTflops(Precision.FP4)).toBe(2 * a.peakTflops(Precision.FP8));
    }
  });

  test('A100 80 GB differs from A100 40 GB in memory and bandwidth, not compute; neither has FP8', () => {
    const [a40, a80] = [Accelerator.A100_40GB, Accelerator.A100_80GB];
    expect([a80.memoryGib, a80.hbmBandwidthGBps]).toEqual([80, 2039]);
    expect(a80.hbmBandwidthGBps).toBeGreaterThan(a40.hbmBandwidthGBps);
    for (const p of Precision.all()) expect(a80.peakTflops(p)).toBe(a40.peakTflops(p));
    expect(a80.peakTflops(Precision.BF16)).toBe(312);
    expect(a80.supportsNativePrecision(Precision.FP8)).toBe(false);
    expect([a80.interconnect, a80.interconnectGBps]).toEqual(['NVLink3', 300]);
  });

  test('datasheet figures, dense: H100 SXM and L40S', () => {
    // H100 SXM: 3.35 TB/s, 989 BF16, 1,979 FP8 (the datasheet's 1,979 / 3,958 are sparse)
    expect(Accelerator.H100.hbmBandwidthGBps).toBe(3350);
    expect([Accelerator.H100.peakTflops(Precision.BF16), Accelerator.H100.peakTflops(Precision.FP8)]).toEqual([989, 1979]);
    // L40S: 864 GB/s, 362 BF16 at the full FP32-accumulate rate, 733 FP8 (the datasheet's 733 / 1,466 are sparse)
    expect(Accelerator.L40S.hbmBandwidthGBps).toBe(864);
    expect([Accelerator.L40S.peakTflops(Precision.BF16), Accelerator.L40S.peakTflops(Precision.FP8)]).toEqual([362, 733]);
    // 48 GB of GDDR6 is 44.7 GiB (EC2: 45,776 MiB per GPU)
    expect(Accelerator.L40S.memoryGib).toBeCloseTo(45776 / 1024, 1);
  });

  test('H200 differs from H100 in memory and bandwidth, not compute', () => {
    expect(Accelerator.H200.memoryGib).toBeGreaterThan(Accelerator.H100.memoryGib);
    expect(Accelerator.H200.hbmBandwidthGBps).toBeGreaterThan(Accelerator.H100.hbmBandwidthGBps);
    expect(Accelerator.H200.peakTflops(Precision.FP8)).toBe(Accelerator.H100.peakTflops(Precision.FP8));
  });

  test('A10G (g5) and A10: the same 24 GB GDDR6 at 600 GB/s on PCIe Gen4; the A10 has the higher tensor rate', () => {
    const [a10g, a10] = [Accelerator.A10G, Accelerator.A10];
    for (const a of [a10g, a10]) {
      // 24 GB = 22,888 MiB as EC2 reports the A10G
      expect(a.memoryGib).toBeCloseTo(22_888 / 1024, 2);
      expect(a.hbmBandwidthGBps).toBe(600);
      // no NVLink: PCIe Gen4 x16, 64 GB/s both directions
      expect([a.interconnect, a.interconnectGBps]).toEqual(['PCIe Gen4', 32]);
      // Ampere without FP8: FP8 weights run at the BF16 rate
      expect(a.supportsNativePrecision(Precision.FP8)).toBe(false);
      expect(a.peakTflops(Precision.FP8)).toBe(a.peakTflops(Precision.BF16));
      expect(a.peakTflops(Precision.INT8)).toBe(2 * a.peakTflops(Precision.BF16));
    }
    // A10 datasheet, dense: 125 TFLOP/s BF16 (250 with sparsity), 250 TOPS INT8; A10G: 70 TFLOP/s
    expect([a10.peakTflops(Precision.BF16), a10.peakTflops(Precision.INT8)]).toEqual([125, 250]);
    expect([a10g.peakTflops(Precision.BF16), a10g.peakTflops(Precision.INT8)]).toEqual([70, 140]);
    // neither has a calibrated decode efficiency
    expect(a10g.decodeMemoryEfficiency).toBeUndefined();
    expect(a10.decodeMemoryEfficiency).toBeUndefined();
  });

  test('H800 is the H100 with a 400 GB/s NVLink (200 one direction)', () => {
    const [h800, h100] = [Accelerator.H800, Accelerator.H100];
    expect([h800.memoryGib, h800.hbmBandwidthGBps]).toEqual([h100.memoryGib, h100.hbmBandwidthGBps]);
    for (const p of Precision.all()) expect(h800.peakTflops(p)).toBe(h100.peakTflops(p));
    expect([h800.peakTflops(Precision.BF16), h800.peakTflops(Precision.FP8)]).toEqual([989, 1979]);
    expect([h800.interconnect, h800.interconnectGBps]).toEqual(['NVLink4', 200]);
    expect(h100.interconnectGBps).toBe(450);
    expect(h800.decodeMemoryEfficiency).toBe(h100.decodeMemoryEfficiency);
  });

  test('H20: 96 GB at 4.0 TB/s, 148 BF16 / 296 FP8 dense, full NVLink4', () => {
    const h20 = Accelerator.H20;
    expect([h20.memoryGib, h20.hbmBandwidthGBps]).toEqual([96, 4000]);
    expect([h20.peakTflops(Precision.BF16), h20.peakTflops(Precision.FP8), h20.peakTflops(Precision.INT8)]).toEqual([148, 296, 296]);
    expect([h20.interconnect, h20.interconnectGBps]).toEqual(['NVLink4', 450]);
    // more memory bandwidth than an H100, about 15% of its compute
    expect(h20.hbmBandwidthGBps).toBeGreaterThan(Accelerator.H100.hbmBandwidthGBps);
    expect(h20.peakTflops(Precision.BF16) / Accelerator.H100.peakTflops(Precision.BF16)).toBeCloseTo(0.15, 2);
  });

  test('of() builds a custom device with the fallbacks', () => {
    const x = Accelerator.of(base);
    expect(x.name).toBe('X1');
    expect(x.supportsNativePrecision(Precision.BF16)).toBe(true);
    expect(x.supportsNativePrecision(Precision.FP8)).toBe(false);
    expect(x.peakTflops(Precision.FP4)).toBe(400);
  });

  test.each([
    ['memoryGib', { memoryGib: 0 }],
    ['hbmBandwidthGBps', { hbmBandwidthGBps: -1 }],
    ['peakTflopsBf16', { peakTflopsBf16: Number.NaN }],
    ['peakTflopsFp8', { peakTflopsFp8: 0 }],
    ['interconnectGBps', { interconnectGBps: 0 }],
  ])('of() rejects a non-positive %s', (field, patch) => {
    expect(() => Accelerator.of({ ...base, ...patch })).toThrow(new RegExp(`'${field}' \\(.*\\) must be a positive number`));
  });

  test('of() rejects an empty name', () => {
    expect(() => Accelerator.of({ ...base, name: ' ' })).toThrow(/'name' must not be empty/);
  });
});

describe('Accelerator.of precision ordering', () => {
  test('rejects FP8 slower than BF16', () => {
    expect(() => Accelerator.of({ ...base, peakTflopsFp8: 300 })).toThrow(/'peakTflopsFp8' \(300\) is below 'peakTflopsBf16' \(400\)/);
  });
  test('rejects FP4 slower than FP8', () => {
    expect(() => Accelerator.of({ ...base, peakTflopsFp8: 800, peakTflopsFp4: 500 })).toThrow(/'peakTflopsFp4' \(500\) is below 'peakTflopsFp8' \(800\)/);
  });
});
