import { Precision } from '../../src';

describe('Precision', () => {
  test('every precision is self-consistent', () => {
    // GIVEN every catalogued precision
    for (const p of Precision.all()) {
      // THEN the byte size covers the bits, adding at most one bit of block-scale overhead
      expect(p.bytesPerElement).toBeGreaterThanOrEqual(p.bits / 8);
      expect(p.bytesPerElement).toBeLessThanOrEqual((p.bits + 1) / 8);
      // AND KV support follows from having a vLLM kv-cache dtype
      expect(p.supportedForKvCache).toBe(p.vllmKvCacheDtype !== undefined);
      // AND of(name) finds the same object
      expect(Precision.of(p.name)).toBe(p);
    }
  });

  test('names are unique', () => {
    const names = Precision.all().map(p => p.name);
    expect(new Set(names).size).toBe(names.length);
  });

  test.each([
    ['BF16', Precision.BF16],
    ['bfloat16', Precision.BF16],
    ['fp8_e4m3', Precision.FP8],
    [' FP8 ', Precision.FP8],
    ['mxfp4', Precision.FP4],
    ['nvfp4', Precision.FP4],
    ['awq', Precision.INT4],
    ['GPTQ', Precision.INT4],
    ['w8a8', Precision.INT8],
    ['float16', Precision.FP16],
  ])('of(%p) resolves the alias case-insensitively', (alias, expected) => {
    // WHEN looking an alias up
    // THEN the canonical precision comes back
    expect(Precision.of(alias)).toBe(expected);
  });

  test('MXFP4 is the FP4 object', () => {
    expect(Precision.MXFP4).toBe(Precision.FP4);
  });

  test('4-bit formats carry their block-scale overhead', () => {
    // MXFP4: 4 bits + one 8-bit scale per 32 elements
    expect(Precision.FP4.bytesPerElement).toBeCloseTo((4 + 8 / 32) / 8, 10);
    // INT4 (AWQ/GPTQ, group 128): 4 bits + FP16 scale + 4-bit zero per group
    expect(Precision.INT4.bytesPerElement).toBeCloseTo((4 + 16 / 128 + 4 / 128) / 8, 10);
  });

  test('INT4 is what a GPTQ group-128 checkpoint stores per weight (Qwen2.5-7B-Instruct-GPTQ-Int4)', () => {
    // GIVEN one GPTQ linear layer of in x out weights, group size 128: qweight packs 4 bits per weight,
    // scales hold one FP16 per group and output, qzeros one 4-bit zero per group and output (packed in
    // int32), and g_idx one int32 per input row
    const [inputs, outputs] = [3584, 18944]; // Qwen2.5-7B's up_proj
    const bytes = inputs * outputs / 2 + (inputs / 128) * outputs * 2 + (inputs / 128) * outputs / 2 + inputs * 4;
    // THEN the bytes per weight are INT4's 4 + 16/128 + 4/128 bits, g_idx adding 4/out bytes (0.02% here)
    expect(bytes / (inputs * outputs)).toBeCloseTo(Precision.INT4.bytesPerElement + 4 / outputs, 10);
    expect(Precision.of('gptq')).toBe(Precision.INT4);
  });

  test('vLLM flags', () => {
    expect(Precision.BF16.vllmKvCacheDtype).toBe('auto');
    expect(Precision.BF16.vllmQuantization).toBeUndefined();
    expect(Precision.FP8.vllmKvCacheDtype).toBe('fp8');
    expect(Precision.FP8.vllmQuantization).toBe('fp8');
    expect(Precision.FP4.vllmQuantization).toBe('mxfp4');
    expect(Precision.FP4.supportedForKvCache).toBe(false);
    expect(Precision.INT4.supportedForKvCache).toBe(false);
    expect(Precision.INT8.supportedForKvCache).toBe(false);
  });

  test('an unknown name lists the known ones', () => {
    // WHEN looking up a name that does not exist
    // THEN the error names the value and the known names
    expect(() => Precision.of('fp12')).toThrow(/Unknown precision 'fp12'; known: .*bf16.*fp8.*int4/);
  });
});
