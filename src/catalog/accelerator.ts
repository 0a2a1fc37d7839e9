import { Precision } from './precision';

/**
 * Who makes an accelerator; decides the device plugin, the AMI family and the serving image.
 */
export enum AcceleratorVendor {
  /** NVIDIA GPUs (CUDA, `nvidia.com/gpu`). */
  NVIDIA = 'nvidia',
  /** AWS Trainium / Inferentia (Neuron SDK, `aws.amazon.com/neuron`). */
  AWS = 'aws',
}

/**
 * The numbers of one accelerator device (a GPU, or a Trainium chip).
 */
export interface AcceleratorProps {
  /** Display name, e.g. 'H100'. */
  readonly name: string;
  /** The maker. */
  readonly vendor: AcceleratorVendor;
  /** Device memory (HBM / GDDR) per device, GiB, as EC2 reports it. */
  readonly memoryGib: number;
  /** Memory bandwidth per device, GB/s (1e9 bytes/s). */
  readonly hbmBandwidthGBps: number;
  /** Dense (no structured sparsity) peak BF16 TFLOP/s per device. */
  readonly peakTflopsBf16: number;
  /**
   * Dense peak FP8 TFLOP/s per device.
   * @default - FP8 is not supported natively; FP8 work runs at the BF16 rate
   */
  readonly peakTflopsFp8?: number;
  /**
   * Dense peak FP4 TFLOP/s per device.
   * @default - FP4 is not supported natively; FP4 work runs at the FP8 (or BF16) rate
   */
  readonly peakTflopsFp4?: number;
  /**
   * Dense peak INT8 TOPS per device.
   * @default - INT8 is not supported natively; INT8 work runs at the FP8 (or BF16) rate
   */
  readonly peakTopsInt8?: number;
  /** Scale-up (NVLink / NeuronLink / PCIe) bandwidth per device, GB/s, one direction. */
  readonly interconnectGBps: number;
  /** Scale-up link name, e.g. 'NVLink4', 'NeuronLink-v3', 'PCIe Gen4'. */
  readonly interconnect: string;
  /**
   * Fraction of the memory bandwidth a vLLM decode step reaches on this device: weight and KV reads
   * at the batch sizes of serving, with the fixed per-layer cost of the small kernels counted apart
   * (see src/engine/vllm-step-model.ts). Fitted on real vLLM runs (bench/validation.sh), not a
   * datasheet figure.
   * @default - 0.7, an assumption for devices no real run calibrates
   */
  readonly decodeMemoryEfficiency?: number;
  /**
   * vLLM's attention kernels on this device keep an FP8 KV cache in the quantized domain: queries are
   * quantized too and QK^T and AV run at the FP8 rate (FlashAttention 3, Hopper). Elsewhere attention
   * runs at the activations' BF16 rate whatever the KV cache holds.
   * @see https://docs.vllm.ai/en/latest/features/quantization/quantized_kvcache/
   * @default false
   */
  readonly fp8Attention?: boolean;
}

/**
 * An accelerator device: memory, bandwidth and dense peak compute per precision.
 *
 * Peak figures are the vendors' dense numbers (sparse figures are twice as high and never reached by
 * LLM inference). Memory is what EC2 reports per device (DescribeInstanceTypes GPU memory in MiB, as
 * listed in Karpenter's instance-types reference; Neuron docs for Trainium). Scale-up bandwidth is one
 * direction: half the both-directions figure vendors quote. Use `Accelerator.of({...})` for devices the
 * catalog does not list.
 */
export class Accelerator {
  /**
   * NVIDIA A100 SXM4 40 GB (p4d): 1,555 GB/s HBM2, 312 TFLOP/s BF16, 624 TOPS INT8 dense, no FP8.
   * NVLink3: 600 GB/s per GPU both directions, 300 one direction.
   * @see https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
   */
  public static readonly A100_40GB = new Accelerator({
    name: 'A100-40GB',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 40, // EC2 p4d: 8 x 40 GiB = 320 GiB HBM2 (40,960 MiB per GPU)
    hbmBandwidthGBps: 1555,
    peakTflopsBf16: 312,
    peakTopsInt8: 624,
    interconnectGBps: 300,
    interconnect: 'NVLink3',
    decodeMemoryEfficiency: 0.69, // the A100 80 GB calibration (same die and kernels), not measured on 40 GB
  });

  /**
   * NVIDIA A100 SXM4 80 GB (p4de): the A100 40 GB's compute (312 TFLOP/s BF16, 624 TOPS INT8 dense, no
   * FP8) with 80 GB HBM2e at 2,039 GB/s (the 80 GB PCIe card has 1,935). NVLink3: 600 GB/s per GPU both
   * directions, 300 one direction.
   * @see https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf
   */
  public static readonly A100_80GB = new Accelerator({
    name: 'A100-80GB',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 80, // EC2 p4de.24xlarge: 8 x 80 GiB = 640 GiB HBM2e (81,920 MiB per GPU, Karpenter instance-types reference)
    hbmBandwidthGBps: 2039, // datasheet: "80GB HBM2e ... 2,039 GB/s" (SXM)
    peakTflopsBf16: 312,
    peakTopsInt8: 624,
    interconnectGBps: 300,
    interconnect: 'NVLink3',
    decodeMemoryEfficiency: 0.69, // fitted on vLLM 0.15.1 runs 38 (and checked on held-out 40), bench/notes/validation.md
  });

  /**
   * NVIDIA H100 SXM5 80 GB (p5): 3.35 TB/s HBM3, 989 TFLOP/s BF16, 1,979 FP8 / INT8 dense (the datasheet's
   * 1,979 / 3,958 are with sparsity). NVLink4: 900 GB/s per GPU both directions, 450 one direction.
   * @see https://www.nvidia.com/en-us/data-center/h100/
   */
  public static readonly H100 = new Accelerator({
    name: 'H100',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 80, // EC2 p5.48xlarge: 8 x 80 GiB = 640 GiB HBM3 (81,920 MiB per GPU)
    hbmBandwidthGBps: 3350,
    peakTflopsBf16: 989,
    peakTflopsFp8: 1979,
    peakTopsInt8: 1979,
    interconnectGBps: 450,
    interconnect: 'NVLink4',
    decodeMemoryEfficiency: 0.85, // fitted on 11 vLLM 0.15.1 runs, checked on 5 held out, bench/notes/validation.md
    fp8Attention: true, // FlashAttention 3 (Hopper) runs an FP8 KV cache in FP8
  });

  /**
   * NVIDIA H200 SXM 141 GB (p5e, p5en): H100 compute with 4.8 TB/s HBM3e.
   * @see https://www.nvidia.com/en-us/data-center/h200/
   */
  public static readonly H200 = new Accelerator({
    name: 'H200',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 141, // EC2 p5e/p5en.48xlarge: 8 x 141 GiB = 1128 GiB HBM3e (144,384 MiB per GPU)
    hbmBandwidthGBps: 4800,
    peakTflopsBf16: 989,
    peakTflopsFp8: 1979,
    peakTopsInt8: 1979,
    interconnectGBps: 450,
    interconnect: 'NVLink4',
    decodeMemoryEfficiency: 0.85, // the H100's (same die and kernels); bench/gpu's H200 decode steps agree within 10%
    fp8Attention: true, // FlashAttention 3 (Hopper) runs an FP8 KV cache in FP8
  });

  /**
   * NVIDIA B200 (HGX B200, p6-b200, 1,000 W): 7.7 TB/s HBM3e (HGX B200 table: 62 TB/s for 8 GPUs);
   * dense BF16 2,250, FP8 / INT8 4,500, FP4 9,000 (half the datasheet's sparse 4.5 / 9 / 18 PFLOPS).
   * NVLink5: 1.8 TB/s per GPU both directions, 900 one direction.
   * @see https://www.nvidia.com/en-us/data-center/hgx/
   */
  public static readonly B200 = new Accelerator({
    name: 'B200',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 179, // EC2 p6-b200.48xlarge: 8 x 179 GiB = 1432 GiB HBM3e (183,359 MiB per GPU)
    hbmBandwidthGBps: 7700,
    peakTflopsBf16: 2250,
    peakTflopsFp8: 4500,
    peakTflopsFp4: 9000,
    peakTopsInt8: 4500,
    interconnectGBps: 900,
    interconnect: 'NVLink5',
  });

  /**
   * One Blackwell GPU of a GB200 Grace Blackwell superchip (p6e-gb200, up to 1,200 W): 8 TB/s HBM3e
   * (NVL72: 576 TB/s for 72 GPUs); dense BF16 2,500, FP8 / INT8 5,000, FP4 10,000 (the NVL72 table's
   * per-GPU sparse 5 / 10 / 20 PFLOPS, halved).
   * @see https://www.nvidia.com/en-us/data-center/gb200-nvl72/
   */
  public static readonly GB200 = new Accelerator({
    name: 'GB200',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 185, // EC2 p6e-gb200.36xlarge: 4 x 185 GiB = 740 GiB HBM3e
    hbmBandwidthGBps: 8000,
    peakTflopsBf16: 2500,
    peakTflopsFp8: 5000,
    peakTflopsFp4: 10000,
    peakTopsInt8: 5000,
    interconnectGBps: 900,
    interconnect: 'NVLink5',
  });

  /**
   * NVIDIA L40S 48 GB GDDR6 (g6e): 864 GB/s; dense BF16 362, FP8 / INT8 733 (the datasheet's 733 / 1,466
   * are with sparsity); no NVLink, PCIe Gen4 x16 (64 GB/s both directions, 32 one direction).
   *
   * BF16 is the full tensor rate with FP32 accumulation, the way vLLM's BF16 GEMMs run (cuBLAS / CUTLASS
   * with an FP32 accumulator): 142 SMs x 1,024 dense FP16/BF16 FLOP per SM and clock x ~2.5 GHz. The
   * GeForce Ada parts halve the FP32-accumulate rate (RTX 4090: 165 vs 330 TFLOP/s, Ada whitepaper), the
   * L40S does not: a measured torch.matmul in BF16 (FP32 accumulate) reaches 269 TFLOP/s on an L40S
   * (zzc0721/torch-performance-test-data issue #43, torch 2.8 / CUDA 12.8), 74% of 362 and well above the
   * 181 a half rate would allow; H100 SXM reaches 80% of its 989 the same way (stas00/ml-engineering MAMF table).
   * @see https://www.nvidia.com/en-us/data-center/l40s/
   */
  public static readonly L40S = new Accelerator({
    name: 'L40S',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 44.7, // DescribeInstanceTypes (Karpenter instance-types reference): 45,776 MiB per GPU = 48 GB
    hbmBandwidthGBps: 864,
    peakTflopsBf16: 362,
    peakTflopsFp8: 733,
    peakTopsInt8: 733,
    interconnectGBps: 32,
    interconnect: 'PCIe Gen4',
    decodeMemoryEfficiency: 0.72, // fitted on vLLM 0.15.1 run 54, the only L40S run (no held-out check)
  });

  /**
   * NVIDIA A10G 24 GB GDDR6 (g5), the A10 variant built for AWS: the A10's memory (600 GB/s) and PCIe Gen4
   * x16 (64 GB/s both directions, 32 one direction; no NVLink), no FP8. It trades tensor throughput for
   * CUDA-core throughput: 70 TFLOP/s FP16 / BF16 tensor and 35 FP32 against the A10's 125 and 31.2, and
   * runs at 300 W against the A10's 150. NVIDIA publishes no A10G datasheet; the 70 and 35 are AWS's A10G
   * datasheet as public spec tables quote it (not read first-hand here), taken as the dense BF16 rate.
   * INT8 at twice that (Ampere's tensor-core ratio, as on the A10) is derived, not published.
   * @see https://d1.awsstatic.com/product-marketing/ec2/NVIDIA_AWS_A10G_DataSheet_FINAL_02_17_2022.pdf
   * @see https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/
   */
  public static readonly A10G = new Accelerator({
    name: 'A10G',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 22.35, // EC2 g5 (Karpenter instance-types reference): 22,888 MiB per GPU = 24 GB
    hbmBandwidthGBps: 600,
    peakTflopsBf16: 70,
    peakTopsInt8: 140,
    interconnectGBps: 32,
    interconnect: 'PCIe Gen4',
  });

  /**
   * NVIDIA A10 24 GB GDDR6 (PCIe, 150 W; not an EC2 GPU: the Mooncake team's A10 testbed): 600 GB/s,
   * dense BF16 / FP16 125 TFLOP/s and INT8 250 TOPS (the datasheet's 250 / 500 are with sparsity), no FP8,
   * PCIe Gen4 x16 (32 GB/s one direction), no NVLink. The same GA102 chip and memory as the A10G, at the
   * full tensor rate: 72 SMs x 1,024 dense FLOP per SM and clock x 1.695 GHz = 125 TFLOP/s.
   * @see https://www.nvidia.com/en-us/data-center/products/a10-gpu/
   */
  public static readonly A10 = new Accelerator({
    name: 'A10',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 22.35, // 24 GB, as the A10G
    hbmBandwidthGBps: 600,
    peakTflopsBf16: 125,
    peakTopsInt8: 250,
    interconnectGBps: 32,
    interconnect: 'PCIe Gen4',
  });

  /**
   * NVIDIA H800 SXM5 80 GB (not an EC2 GPU: DeepSeek's and the Mooncake team's clusters): the H100 SXM
   * with NVLink cut to 400 GB/s per GPU both directions (200 one direction, against the H100's 450) and
   * FP64 cut to 1 TFLOP/s; memory (80 GB HBM3, 3.35 TB/s) and the dense BF16 / FP8 rates (989 / 1,979)
   * are the H100's. No NVIDIA datasheet for it was found in the sources searched; these are the figures
   * DeepSeek's description of its H800 cluster and public spec tables agree on. DeepSeek measured about
   * 160 GB/s of usable NVLink bandwidth (arXiv 2412.19437, section 3.2.2).
   * @see https://arxiv.org/abs/2505.09343
   */
  public static readonly H800 = new Accelerator({
    name: 'H800',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 80, // 80 GB HBM3, counted as EC2 counts the H100's (81,920 MiB)
    hbmBandwidthGBps: 3350,
    peakTflopsBf16: 989,
    peakTflopsFp8: 1979,
    peakTopsInt8: 1979,
    interconnectGBps: 200,
    interconnect: 'NVLink4',
    decodeMemoryEfficiency: 0.85, // the H100's (same die, memory and kernels), not measured on an H800
    fp8Attention: true, // FlashAttention 3 (Hopper) runs an FP8 KV cache in FP8
  });

  /**
   * NVIDIA H20 96 GB HBM3 (not an EC2 GPU; the Hopper part NVIDIA cut down for export): 4.0 TB/s, dense
   * BF16 148 TFLOP/s, FP8 / INT8 296 (about 15% of the H100's), NVLink4 900 GB/s both directions (450 one
   * direction). NVIDIA publishes no H20 datasheet; these are the figures public spec tables agree on. The
   * 141 GB HBM3e H20 (H20-3e, the Mooncake SGLang transfer measurement) is not catalogued: its memory
   * bandwidth is not published; describe it with `Accelerator.of({...})` where it matters.
   * @see https://willitrunai.com/es/gpus/h20-96gb
   */
  public static readonly H20 = new Accelerator({
    name: 'H20',
    vendor: AcceleratorVendor.NVIDIA,
    memoryGib: 96, // the quoted 96 GB, read as the H100's 80 is (EC2: 81,920 MiB)
    hbmBandwidthGBps: 4000,
    peakTflopsBf16: 148,
    peakTflopsFp8: 296,
    peakTopsInt8: 296,
    interconnectGBps: 450,
    interconnect: 'NVLink4',
    fp8Attention: true, // FlashAttention 3 (Hopper) runs an FP8 KV cache in FP8
  });

  /**
   * AWS Trainium (trn1): 32 GiB HBM, 820 GB/s, 190 TFLOP/s BF16 / FP16 / cFP8, 380 TOPS INT8.
   * NeuronLink-v2: 384 GB/s per chip (Neuron docs' Trainium2 comparison table); taken as both directions
   * summed, as NVIDIA quotes NVLink, so 192 one direction.
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/trainium.html
   */
  public static readonly TRAINIUM = new Accelerator({
    name: 'Trainium',
    vendor: AcceleratorVendor.AWS,
    memoryGib: 32,
    hbmBandwidthGBps: 820,
    peakTflopsBf16: 190,
    peakTflopsFp8: 190,
    peakTopsInt8: 380,
    interconnectGBps: 192,
    interconnect: 'NeuronLink-v2',
  });

  /**
   * AWS Trainium2 (trn2): 96 GiB HBM, 2.9 TB/s, dense BF16 667, FP8 1,299 TFLOP/s (no INT8 / FP4 rate
   * published); NeuronLink-v3 1.28 TB/s per chip (2D torus within the instance), taken as both
   * directions summed, so 640 one direction.
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-hardware/trainium2.html
   */
  public static readonly TRAINIUM2 = new Accelerator({
    name: 'Trainium2',
    vendor: AcceleratorVendor.AWS,
    memoryGib: 96, // Neuron docs: 96 GiB per chip (the EC2 spec page misreports trn2 memory)
    hbmBandwidthGBps: 2900,
    peakTflopsBf16: 667,
    peakTflopsFp8: 1299,
    interconnectGBps: 640,
    interconnect: 'NeuronLink-v3',
  });

  /**
   * Every catalogued accelerator that an EC2 instance type carries: what the sizing may suggest moving to.
   */
  public static all(): Accelerator[] {
    return [
      Accelerator.A100_40GB, Accelerator.A100_80GB, Accelerator.H100, Accelerator.H200, Accelerator.B200, Accelerator.GB200,
      Accelerator.L40S, Accelerator.A10G, Accelerator.TRAINIUM, Accelerator.TRAINIUM2,
    ];
  }

  /**
   * The catalogued accelerators that no EC2 instance type carries (A10, H800, H20): the GPUs of published
   * prefill/decode measurements, for the sizing and the simulator on an `AcceleratedInstanceType.server({...})`.
   * Kept out of `all()`, so that nothing suggests a device AWS does not sell.
   */
  public static outsideEc2(): Accelerator[] {
    return [Accelerator.A10, Accelerator.H800, Accelerator.H20];
  }

  /**
   * An accelerator the catalog does not list.
   *
   * @throws when a number is not positive or a narrower precision is slower than a wider one
   */
  public static of(props: AcceleratorProps): Accelerator {
    return new Accelerator(props);
  }

  /** Display name, e.g. 'H100'. */
  public readonly name: string;
  /** The maker. */
  public readonly vendor: AcceleratorVendor;
  /** Device memory per device, GiB. */
  public readonly memoryGib: number;
  /** Memory bandwidth per device, GB/s. */
  public readonly hbmBandwidthGBps: number;
  /** Scale-up bandwidth per device, GB/s, one direction. */
  public readonly interconnectGBps: number;
  /** Scale-up link name. */
  public readonly interconnect: string;
  /** Fraction of memory bandwidth a vLLM decode step reaches; undefined where no real run calibrates it. */
  public readonly decodeMemoryEfficiency?: number;
  /** Attention runs an FP8 KV cache at the FP8 rate (FlashAttention 3). */
  public readonly fp8Attention: boolean;

  private readonly bf16: number;
  private readonly fp8?: number;
  private readonly fp4?: number;
  private readonly int8?: number;

  private constructor(props: AcceleratorProps) {
    if (!props.name || props.name.trim() === '') {
      throw new Error("Accelerator 'name' must not be empty; pass e.g. name: 'H100'");
    }
    const positive: Array<[string, number | undefined]> = [
      ['memoryGib', props.memoryGib],
      ['hbmBandwidthGBps', props.hbmBandwidthGBps],
      ['peakTflopsBf16', props.peakTflopsBf16],
      ['peakTflopsFp8', props.peakTflopsFp8],
      ['peakTflopsFp4', props.peakTflopsFp4],
      ['peakTopsInt8', props.peakTopsInt8],
      ['interconnectGBps', props.interconnectGBps],
    ];
    for (const [field, value] of positive) {
      if (value !== undefined && !(Number.isFinite(value) && value > 0)) {
        throw new Error(`Accelerator '${props.name}': '${field}' (${value}) must be a positive number`);
      }
    }
    // A narrower format slower than a wider one is a typo (e.g. a sparse BF16 figure next to a dense FP8 one).
    const widerOrder: Array<[string, number | undefined, string, number]> = [
      ['peakTflopsFp8', props.peakTflopsFp8, 'peakTflopsBf16', props.peakTflopsBf16],
      ['peakTflopsFp4', props.peakTflopsFp4, props.peakTflopsFp8 !== undefined ? 'peakTflopsFp8' : 'peakTflopsBf16',
        props.peakTflopsFp8 ?? props.peakTflopsBf16],
    ];
    const fraction = props.decodeMemoryEfficiency;
    if (fraction !== undefined && !(Number.isFinite(fraction) && fraction > 0 && fraction <= 1)) {
      throw new Error(`Accelerator '${props.name}': 'decodeMemoryEfficiency' (${fraction}) must be in (0, 1]; omit it for the 0.7 default`);
    }
    for (const [field, value, widerField, wider] of widerOrder) {
      if (value !== undefined && value < wider) {
        throw new Error(`Accelerator '${props.name}': '${field}' (${value}) is below '${widerField}' (${wider}); use dense figures for both`);
      }
    }
    this.name = props.name;
    this.vendor = props.vendor;
    this.memoryGib = props.memoryGib;
    this.hbmBandwidthGBps = props.hbmBandwidthGBps;
    this.interconnectGBps = props.interconnectGBps;
    this.fp8Attention = props.fp8Attention === true && props.peakTflopsFp8 !== undefined;
    this.interconnect = props.interconnect;
    this.decodeMemoryEfficiency = props.decodeMemoryEfficiency;
    this.bf16 = props.peakTflopsBf16;
    this.fp8 = props.peakTflopsFp8;
    this.fp4 = props.peakTflopsFp4;
    this.int8 = props.peakTopsInt8;
  }

  /**
   * Whether the device computes natively in the given precision (has tensor-core / matrix-engine
   * support for it). BF16 and FP16 are native everywhere in this catalog.
   */
  public supportsNativePrecision(precision: Precision): boolean {
    switch (precision.name) {
      case 'bf16':
      case 'fp16':
        return true;
      case 'fp8':
        return this.fp8 !== undefined;
      case 'fp4':
        return this.fp4 !== undefined;
      case 'int8':
        return this.int8 !== undefined;
      case 'int4':
        // No listed device has a dense INT4 rate published for LLM kernels: INT4 weights are
        // dequantized and computed at the activation precision.
        return false;
      default:
        return false;
    }
  }

  /**
   * Dense peak TFLOP/s (TOPS for integer formats) per device for matrix math in the given precision.
   *
   * Without native support, vLLM runs a 4-bit or FP8 format weight-only: the weights are dequantized
   * in the kernel and the math runs at the activation precision, BF16 (FP4 on H100: MXFP4 weights with
   * unquantized activations, vLLM's gpt-oss Triton MoE kernels on SM90; FP8 on A100: FP8 Marlin).
   * INT4 (AWQ / GPTQ, Marlin W4A16) is weight-only on every device. INT8 (W8A8) falls back to the
   * FP8 rate, then BF16. Never throws.
   * @see https://docs.vllm.ai/en/v0.19.1/api/vllm/model_executor/layers/fused_moe/gpt_oss_triton_kernels_moe/
   */
  public peakTflops(precision: Precision): number {
    const fp8OrBf16 = this.fp8 ?? this.bf16;
    switch (precision.name) {
      case 'fp4':
        return this.fp4 ?? this.bf16;
      case 'fp8':
        return fp8OrBf16;
      case 'int8':
        return this.int8 ?? fp8OrBf16;
      default:
        return this.bf16;
    }
  }

  /** The display name. */
  public toString(): string {
    return this.name;
  }
}
