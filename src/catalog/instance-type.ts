import { Accelerator, AcceleratorVendor } from './accelerator';

/**
 * CPU architecture of an instance type.
 */
export enum CpuArchitecture {
  /** Intel / AMD x86-64. */
  X86_64 = 'x86_64',
  /** AWS Graviton / NVIDIA Grace (arm64). */
  ARM_64 = 'arm64',
}

/**
 * EKS-optimized AMI types (the `amiType` of a managed node group).
 *
 * @see https://docs.aws.amazon.com/eks/latest/APIReference/API_Nodegroup.html
 */
export enum EksAmiType {
  /** AL2023 x86-64 with the NVIDIA driver, container toolkit and EFA driver. */
  AL2023_X86_64_NVIDIA = 'AL2023_x86_64_NVIDIA',
  /** AL2023 arm64 with the NVIDIA driver (Grace-based instances such as p6e-gb200). */
  AL2023_ARM_64_NVIDIA = 'AL2023_ARM_64_NVIDIA',
  /** AL2023 x86-64 with the Neuron driver (Trainium / Inferentia). */
  AL2023_X86_64_NEURON = 'AL2023_x86_64_NEURON',
  /** AL2023 x86-64 without accelerator drivers. */
  AL2023_X86_64_STANDARD = 'AL2023_x86_64_STANDARD',
}

/**
 * The `InterfaceType` of a network interface in an EC2 launch template.
 *
 * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html
 */
export enum NetworkInterfaceType {
  /** A plain ENA interface (IP traffic only). */
  INTERFACE = 'interface',
  /** EFA with ENA: OS-bypass traffic plus IP addresses. */
  EFA = 'efa',
  /** EFA-only: OS-bypass traffic, no IP address (VPC CNI >= 1.18.5 on EKS). */
  EFA_ONLY = 'efa-only',
}

/**
 * How capacity of an instance type can be bought.
 */
export enum PurchaseOption {
  /** On-Demand instances. */
  ON_DEMAND = 'on-demand',
  /** Spot instances. */
  SPOT = 'spot',
  /** On-Demand Capacity Reservations (ODCR). */
  CAPACITY_RESERVATION = 'capacity-reservation',
  /** EC2 Capacity Blocks for ML. */
  CAPACITY_BLOCK = 'capacity-block',
}

/**
 * One network interface of an instance's launch template.
 */
export interface NetworkInterfaceSlot {
  /** The network card the interface lives on. */
  readonly networkCardIndex: number;
  /** The device index of the interface on that card. */
  readonly deviceIndex: number;
  /** The interface type. */
  readonly interfaceType: NetworkInterfaceType;
}

/**
 * The facts of an accelerated EC2 instance type.
 */
export interface AcceleratedInstanceTypeProps {
  /** The EC2 instance type name, e.g. 'p5en.48xlarge'. */
  readonly name: string;
  /** The accelerator device. */
  readonly accelerator: Accelerator;
  /** Accelerator devices per instance (GPUs, or Trainium chips). */
  readonly acceleratorCount: number;
  /** vCPUs per instance. */
  readonly vcpus: number;
  /** Host memory, GiB. */
  readonly memoryGib: number;
  /** Local NVMe instance-store drives; 0 when none. */
  readonly localNvmeCount: number;
  /** Size of each local NVMe drive, GB (1e9 bytes); 0 when none. */
  readonly localNvmeGbEach: number;
  /** Total network bandwidth, Gbit/s. */
  readonly networkBandwidthGbps: number;
  /** Network cards (DescribeInstanceTypes `MaximumNetworkCards`). */
  readonly networkCards: number;
  /** Maximum EFA interfaces (DescribeInstanceTypes `EfaInfo.MaximumEfaInterfaces`); 0 = no EFA. */
  readonly maxEfaInterfaces: number;
  /** CPU architecture. */
  readonly architecture: CpuArchitecture;
  /** The EKS AMI type for nodes of this type. */
  readonly amiType: EksAmiType;
  /**
   * Network cards other than card 0 that get an `efa-only` interface at device index 0.
   * @default - cards 1 .. min(networkCards, maxEfaInterfaces) - 1 (every card when each has an EFA); none without EFA
   */
  readonly efaOnlyCards?: number[];
  /**
   * Whether network card 0 supports EFA, so an `efa-only` interface goes on card 0 device index 1
   * (behind the ENA primary at device index 0).
   * @default - true when maxEfaInterfaces leaves room for one more EFA beyond `efaOnlyCards`
   */
  readonly efaOnCardZero?: boolean;
  /**
   * How the capacity can be bought.
   * @default - [ON_DEMAND, SPOT, CAPACITY_RESERVATION, CAPACITY_BLOCK]
   */
  readonly purchaseOptions?: PurchaseOption[];
  /**
   * Instances in one UltraServer (one NVLink / NeuronLink domain across instances).
   * @default - undefined: the scale-up domain is one instance
   */
  readonly ultraServerSize?: number;
  /**
   * The lowest EKS Kubernetes version that supports the type, e.g. '1.33'.
   * @default - undefined: every supported EKS version
   */
  readonly minKubernetesVersion?: string;
  /**
   * NeuronCores per Neuron device (trn2: 8, trn1: 2); the `aws.amazon.com/neuroncore` resource counts these.
   * @default - undefined for GPUs
   */
  readonly neuronCoresPerDevice?: number;
  /**
   * The Logical NeuronCore configurations (LNC: physical NeuronCores grouped into one logical core,
   * `NEURON_LOGICAL_NC_CONFIG`) the Neuron runtime accepts on this type, its default first. Each must
   * divide `neuronCoresPerDevice`.
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html
   * @default - [1] for Neuron types (LNC applies to Trn2 and later only); none for GPUs
   */
  readonly logicalNeuronCoreConfigs?: number[];
}

const ALL_PURCHASE_OPTIONS = [
  PurchaseOption.ON_DEMAND, PurchaseOption.SPOT, PurchaseOption.CAPACITY_RESERVATION, PurchaseOption.CAPACITY_BLOCK,
];

/**
 * A server of accelerators outside EC2 (the testbed of a published measurement), as
 * {@link AcceleratedInstanceType.server} takes it: the simulator and the sizing need the devices, how
 * many share one scale-up domain, and the network between servers.
 */
export interface AcceleratorServerProps {
  /** The accelerator device; its `interconnect` is the scale-up link inside the server. */
  readonly accelerator: Accelerator;
  /** Accelerators in one server, all on one scale-up link (NVLink / NVSwitch, or PCIe). */
  readonly acceleratorCount: number;
  /**
   * Network between servers, all NICs of one server together, Gbit/s: the fabric that carries KV
   * transfers from prefill to decode servers (e.g. 8 x 200 Gbit/s RoCE = 1600).
   */
  readonly networkBandwidthGbps: number;
  /**
   * A name for plans and reports, `family.size` in lower case.
   * @default - '<accelerator>-server.<count>x', e.g. 'h800-server.8x'
   */
  readonly name?: string;
  /**
   * vCPUs per server. Only pod sizing reads it, not the simulator.
   * @default - 16 per accelerator
   */
  readonly vcpus?: number;
  /**
   * Host memory, GiB. Only pod sizing and host KV tiers read it, not the step times.
   * @default - twice the accelerator memory of the server
   */
  readonly memoryGib?: number;
  /**
   * Local NVMe drives, for a disk KV tier.
   * @default 0
   */
  readonly localNvmeCount?: number;
  /**
   * Size of each local NVMe drive, GB.
   * @default 0
   */
  readonly localNvmeGbEach?: number;
}

/**
 * An accelerated EC2 instance type: devices, host resources, network-card / EFA layout, EKS AMI type,
 * Kubernetes resource names and purchase constraints.
 *
 * Sources for every listed type: the EC2 accelerated-computing instance specifications
 * (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html), DescribeInstanceTypes values as
 * published in Karpenter's instance-types reference (vCPU, memory, GPU memory, local NVMe, bandwidth,
 * `vpc.amazonaws.com/efa`; https://karpenter.sh/docs/reference/instance-types/), and the
 * EC2 guide "Maximize network bandwidth on instances with multiple network cards"
 * (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html).
 * `AcceleratedInstanceType.server({...})` describes a server outside EC2 for the sizing and the simulator.
 */
export class AcceleratedInstanceType {
  /**
   * p4d.24xlarge: 8 x A100 40 GB, 96 vCPU, 1152 GiB, 8 x 1000 GB NVMe, 4 x 100 Gbit/s on 4 cards, 4 EFA.
   */
  public static readonly P4D_24XLARGE = new AcceleratedInstanceType({
    name: 'p4d.24xlarge',
    accelerator: Accelerator.A100_40GB,
    acceleratorCount: 8,
    vcpus: 96,
    memoryGib: 1152,
    localNvmeCount: 8,
    localNvmeGbEach: 1000,
    networkBandwidthGbps: 400,
    networkCards: 4,
    maxEfaInterfaces: 4, // every card carries one EFA, card 0 included
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });

  /**
   * p4de.24xlarge: p4d.24xlarge with 8 x A100 80 GB: 96 vCPU, 1152 GiB, 8 x 1000 GB NVMe,
   * 4 x 100 Gbit/s on 4 cards, 4 EFA, the same layout as p4d. DescribeInstanceTypes (Karpenter's generated
   * reference and VPC limits): 96 vCPU, 1,179,648 MiB memory, 81,920 MiB GPU memory x 8, 8,000 GB NVMe,
   * 400,000 Mbit/s, network cards 0-3, `vpc.amazonaws.com/efa` 4.
   * @see https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html
   * @see https://karpenter.sh/docs/reference/instance-types/#p4de24xlarge
   */
  public static readonly P4DE_24XLARGE = new AcceleratedInstanceType({
    name: 'p4de.24xlarge',
    accelerator: Accelerator.A100_80GB,
    acceleratorCount: 8,
    vcpus: 96,
    memoryGib: 1152,
    localNvmeCount: 8,
    localNvmeGbEach: 1000,
    networkBandwidthGbps: 400,
    networkCards: 4,
    maxEfaInterfaces: 4, // every card carries one EFA, card 0 included (as p4d)
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });

  /**
   * p5.48xlarge: 8 x H100 80 GB, 192 vCPU, 2048 GiB, 8 x 3800 GB NVMe, 3200 Gbit/s EFAv2 on 32 cards, 32 EFA.
   * Layout per the EC2 guide: ENA on card 0 device 0, efa-only on card 0 device 1 and on cards 1-31.
   */
  public static readonly P5_48XLARGE = new AcceleratedInstanceType({
    name: 'p5.48xlarge',
    accelerator: Accelerator.H100,
    acceleratorCount: 8,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 8,
    localNvmeGbEach: 3800,
    networkBandwidthGbps: 3200,
    networkCards: 32,
    maxEfaInterfaces: 32,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });

  /**
   * p5e.48xlarge: 8 x H200 141 GB, otherwise as p5.48xlarge (32 cards, 32 EFA).
   */
  public static readonly P5E_48XLARGE = new AcceleratedInstanceType({
    name: 'p5e.48xlarge',
    accelerator: Accelerator.H200,
    acceleratorCount: 8,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 8,
    localNvmeGbEach: 3800,
    networkBandwidthGbps: 3200,
    networkCards: 32,
    maxEfaInterfaces: 32,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });

  /**
   * p5en.48xlarge: 8 x H200 141 GB, 192 vCPU, 2048 GiB, 8 x 3800 GB NVMe, 3200 Gbit/s EFAv3 on 16 cards, 16 EFA.
   */
  public static readonly P5EN_48XLARGE = new AcceleratedInstanceType({
    name: 'p5en.48xlarge',
    accelerator: Accelerator.H200,
    acceleratorCount: 8,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 8,
    localNvmeGbEach: 3800,
    networkBandwidthGbps: 3200,
    networkCards: 16,
    maxEfaInterfaces: 16,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });

  /**
   * p6-b200.48xlarge: 8 x B200 179 GiB, 192 vCPU, 2048 GiB, 8 x 3800 GB NVMe, 8 x 400 Gbit/s EFAv4 on 8 cards, 8 EFA.
   */
  public static readonly P6_B200_48XLARGE = new AcceleratedInstanceType({
    name: 'p6-b200.48xlarge',
    accelerator: Accelerator.B200,
    acceleratorCount: 8,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 8,
    localNvmeGbEach: 3800,
    networkBandwidthGbps: 3200,
    networkCards: 8,
    maxEfaInterfaces: 8,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
  });

  /**
   * p6e-gb200.36xlarge: 4 x B200 (GB200 superchips, 185 GiB each), 144 Grace vCPU (arm64), 960 GiB,
   * 3 x 7500 GB NVMe, 17 network cards. Card 0 must be a plain `interface` (EKS guide "Use P6e-GB200
   * UltraServers with Amazon EKS"); cards 1-16 form four NCI groups of four, and one efa-only interface
   * per group (cards 1, 5, 9, 13) gives the 4 EFA devices the guide expects per node. Sold only as
   * Capacity Blocks for UltraServers (u-p6e-gb200x36 = 9 instances, x72 = 18); the NVLink domain spans
   * the UltraServer. EKS needs Kubernetes >= 1.33.
   * @see https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html
   */
  public static readonly P6E_GB200_36XLARGE = new AcceleratedInstanceType({
    name: 'p6e-gb200.36xlarge',
    accelerator: Accelerator.GB200,
    acceleratorCount: 4,
    vcpus: 144,
    memoryGib: 960,
    localNvmeCount: 3,
    localNvmeGbEach: 7500,
    networkBandwidthGbps: 3200, // Karpenter's generated bandwidth table; the 4-EFA layout drives 4 x 400 Gbit/s
    networkCards: 17,
    maxEfaInterfaces: 16, // assumption: one EFA per card on cards 1-16 (card 0 is ENA-only)
    efaOnlyCards: [1, 5, 9, 13],
    efaOnCardZero: false,
    architecture: CpuArchitecture.ARM_64,
    amiType: EksAmiType.AL2023_ARM_64_NVIDIA,
    purchaseOptions: [PurchaseOption.CAPACITY_BLOCK],
    ultraServerSize: 18, // u-p6e-gb200x72; the x36 UltraServer holds 9
    minKubernetesVersion: '1.33',
  });

  /**
   * trn1.32xlarge: 16 x Trainium 32 GiB, 128 vCPU, 512 GiB, 4 x 1900 GB NVMe, 800 Gbit/s on 8 cards, 8 EFA.
   */
  public static readonly TRN1_32XLARGE = new AcceleratedInstanceType({
    name: 'trn1.32xlarge',
    accelerator: Accelerator.TRAINIUM,
    acceleratorCount: 16,
    vcpus: 128,
    memoryGib: 512,
    localNvmeCount: 4,
    localNvmeGbEach: 1900,
    networkBandwidthGbps: 800,
    networkCards: 8,
    maxEfaInterfaces: 8,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NEURON,
    neuronCoresPerDevice: 2, // Neuron docs: Trainium has 2 NeuronCore-v2
    // Neuron compiler error NCC_EARG001: on trn1 only LNC 1 is supported.
    // https://awsdocs-neuron.readthedocs-hosted.com/en/latest/compiler/error-codes/EARG001.html
    logicalNeuronCoreConfigs: [1],
  });

  /**
   * trn2.48xlarge: 16 x Trainium2 96 GiB, 192 vCPU, 2048 GiB, 4 x 1900 GB NVMe, 3200 Gbit/s EFAv3 on 16 cards, 16 EFA.
   */
  public static readonly TRN2_48XLARGE = new AcceleratedInstanceType({
    name: 'trn2.48xlarge',
    accelerator: Accelerator.TRAINIUM2,
    acceleratorCount: 16,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 4,
    localNvmeGbEach: 1900,
    networkBandwidthGbps: 3200,
    networkCards: 16,
    maxEfaInterfaces: 16,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NEURON,
    neuronCoresPerDevice: 8, // Neuron docs: Trainium2 has 8 NeuronCore-v3
    // LNC 2 (the default: 4 logical cores per chip, 64 per instance) or 1 (8 per chip, 128 per instance).
    // https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html
    logicalNeuronCoreConfigs: [2, 1],
  });

  /**
   * trn2u.48xlarge: a trn2.48xlarge inside a Trn2 UltraServer (u-trn2x64: 4 instances joined by
   * NeuronLink, 64 chips). No Spot.
   */
  public static readonly TRN2U_48XLARGE = new AcceleratedInstanceType({
    name: 'trn2u.48xlarge',
    accelerator: Accelerator.TRAINIUM2,
    acceleratorCount: 16,
    vcpus: 192,
    memoryGib: 2048,
    localNvmeCount: 4,
    localNvmeGbEach: 1900,
    networkBandwidthGbps: 3200,
    networkCards: 16,
    maxEfaInterfaces: 16,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NEURON,
    purchaseOptions: [PurchaseOption.ON_DEMAND, PurchaseOption.CAPACITY_RESERVATION, PurchaseOption.CAPACITY_BLOCK],
    ultraServerSize: 4,
    neuronCoresPerDevice: 8,
    logicalNeuronCoreConfigs: [2, 1], // as trn2.48xlarge
  });

  /**
   * g5.12xlarge: 4 x A10G 24 GB on PCIe (no NVLink), 48 vCPU, 192 GiB, 1 x 3800 GB NVMe, 40 Gbit/s on
   * 1 card, 1 EFA (ENA at card 0 device 0, efa-only at device 1, as g6e.12xlarge). DescribeInstanceTypes
   * (Karpenter's generated reference): 48 vCPU, 196,608 MiB memory, 22,888 MiB GPU memory x 4, 3,800 GB
   * NVMe, 40,000 Mbit/s, network card 0 only, `vpc.amazonaws.com/efa` 1. Capacity Blocks do not offer g5.
   * @see https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html
   * @see https://karpenter.sh/docs/reference/instance-types/#g512xlarge
   */
  public static readonly G5_12XLARGE = new AcceleratedInstanceType({
    name: 'g5.12xlarge',
    accelerator: Accelerator.A10G,
    acceleratorCount: 4,
    vcpus: 48,
    memoryGib: 192,
    localNvmeCount: 1,
    localNvmeGbEach: 3800,
    networkBandwidthGbps: 40,
    networkCards: 1,
    maxEfaInterfaces: 1,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
    purchaseOptions: [PurchaseOption.ON_DEMAND, PurchaseOption.SPOT, PurchaseOption.CAPACITY_RESERVATION],
  });

  /**
   * g5.48xlarge: 8 x A10G 24 GB on PCIe (no NVLink), 192 vCPU, 768 GiB, 2 x 3800 GB NVMe, 100 Gbit/s on
   * 1 card, 1 EFA. DescribeInstanceTypes (Karpenter's generated reference): 192 vCPU, 786,432 MiB memory,
   * 22,888 MiB GPU memory x 8, 7,600 GB NVMe, 100,000 Mbit/s, network card 0 only, `vpc.amazonaws.com/efa` 1.
   * @see https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html
   * @see https://karpenter.sh/docs/reference/instance-types/#g548xlarge
   */
  public static readonly G5_48XLARGE = new AcceleratedInstanceType({
    name: 'g5.48xlarge',
    accelerator: Accelerator.A10G,
    acceleratorCount: 8,
    vcpus: 192,
    memoryGib: 768,
    localNvmeCount: 2,
    localNvmeGbEach: 3800,
    networkBandwidthGbps: 100,
    networkCards: 1,
    maxEfaInterfaces: 1,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
    purchaseOptions: [PurchaseOption.ON_DEMAND, PurchaseOption.SPOT, PurchaseOption.CAPACITY_RESERVATION],
  });

  /**
   * g6e.12xlarge: 4 x L40S 48 GB, 48 vCPU, 384 GiB, 3800 GB NVMe (2 x 1900), 100 Gbit/s on 1 card, 1 EFA.
   * The single card supports EFA, so the EC2 rule ("if network card 0 supports EFA, add an efa-only
   * interface at card 0 device 1") gives ENA at device 0 plus efa-only at device 1: the ENA keeps the pod
   * IPs and the EFA takes none, the same shape as every other type here. Capacity Blocks do not offer g6e.
   */
  public static readonly G6E_12XLARGE = new AcceleratedInstanceType({
    name: 'g6e.12xlarge',
    accelerator: Accelerator.L40S,
    acceleratorCount: 4,
    vcpus: 48,
    memoryGib: 384,
    localNvmeCount: 2,
    localNvmeGbEach: 1900,
    networkBandwidthGbps: 100,
    networkCards: 1,
    maxEfaInterfaces: 1,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
    purchaseOptions: [PurchaseOption.ON_DEMAND, PurchaseOption.SPOT, PurchaseOption.CAPACITY_RESERVATION],
  });

  /**
   * g6e.48xlarge: 8 x L40S 48 GB, 192 vCPU, 1536 GiB, 4 x 1900 GB NVMe, 400 Gbit/s on 4 cards, 4 EFA.
   */
  public static readonly G6E_48XLARGE = new AcceleratedInstanceType({
    name: 'g6e.48xlarge',
    accelerator: Accelerator.L40S,
    acceleratorCount: 8,
    vcpus: 192,
    memoryGib: 1536,
    localNvmeCount: 4,
    localNvmeGbEach: 1900,
    networkBandwidthGbps: 400,
    networkCards: 4,
    maxEfaInterfaces: 4,
    architecture: CpuArchitecture.X86_64,
    amiType: EksAmiType.AL2023_X86_64_NVIDIA,
    purchaseOptions: [PurchaseOption.ON_DEMAND, PurchaseOption.SPOT, PurchaseOption.CAPACITY_RESERVATION],
  });

  /**
   * Every catalogued instance type.
   */
  public static all(): AcceleratedInstanceType[] {
    return [
      AcceleratedInstanceType.P4D_24XLARGE,
      AcceleratedInstanceType.P4DE_24XLARGE,
      AcceleratedInstanceType.P5_48XLARGE,
      AcceleratedInstanceType.P5E_48XLARGE,
      AcceleratedInstanceType.P5EN_48XLARGE,
      AcceleratedInstanceType.P6_B200_48XLARGE,
      AcceleratedInstanceType.P6E_GB200_36XLARGE,
      AcceleratedInstanceType.TRN1_32XLARGE,
      AcceleratedInstanceType.TRN2_48XLARGE,
      AcceleratedInstanceType.TRN2U_48XLARGE,
      AcceleratedInstanceType.G5_12XLARGE,
      AcceleratedInstanceType.G5_48XLARGE,
      AcceleratedInstanceType.G6E_12XLARGE,
      AcceleratedInstanceType.G6E_48XLARGE,
    ];
  }

  /**
   * An instance type the catalog does not list.
   *
   * @throws when a count is not a positive integer, an `efaOnlyCards` entry is not a card 1 .. networkCards - 1,
   * the layout needs more EFA interfaces than `maxEfaInterfaces`, or the AMI type does not match the
   * architecture or the accelerator vendor
   */
  public static of(props: AcceleratedInstanceTypeProps): AcceleratedInstanceType {
    return new AcceleratedInstanceType(props);
  }

  /**
   * A server of accelerators that is not an EC2 instance type (an H800 or A100 node of a published
   * measurement), so that the sizing and the simulator (`ServingPlan`, the engine configuration's
   * `hardware` section) can run on it: the step times come from the accelerator, tensor parallelism is
   * bounded by `acceleratorCount`, and KV transfers between servers get `networkBandwidthGbps`.
   *
   * Not for the constructs that launch nodes: the name is no EC2 instance type, the server has one
   * network card and no EFA (RDMA NICs outside AWS are counted in `networkBandwidthGbps`), and it is not
   * listed in `all()` or found by `fromName`.
   *
   * @throws when a count is not a positive integer, the bandwidth is not positive, or the name is not 'family.size'
   */
  public static server(props: AcceleratorServerProps): AcceleratedInstanceType {
    const count = props.acceleratorCount;
    if (!(Number.isInteger(count) && count > 0)) {
      throw new Error(`server of ${props.accelerator.name}: 'acceleratorCount' (${count}) must be a positive integer, the accelerators of one server`);
    }
    const device = props.accelerator.name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
    const name = props.name ?? `${device || 'accelerator'}-server.${count}x`;
    if (!/^[a-z0-9-]+\.[a-z0-9-]+$/.test(name)) {
      throw new Error(`server of ${props.accelerator.name}: 'name' ('${name}') must be 'family.size' in lower case, e.g. '${device || 'accelerator'}-server.${count}x'; or omit it`);
    }
    const isNeuron = props.accelerator.vendor === AcceleratorVendor.AWS;
    return new AcceleratedInstanceType({
      name,
      accelerator: props.accelerator,
      acceleratorCount: count,
      vcpus: props.vcpus ?? 16 * count,
      memoryGib: props.memoryGib ?? 2 * props.accelerator.memoryGib * count,
      localNvmeCount: props.localNvmeCount ?? 0,
      localNvmeGbEach: props.localNvmeGbEach ?? 0,
      networkBandwidthGbps: props.networkBandwidthGbps,
      networkCards: 1,
      maxEfaInterfaces: 0,
      architecture: CpuArchitecture.X86_64,
      amiType: isNeuron ? EksAmiType.AL2023_X86_64_NEURON : EksAmiType.AL2023_X86_64_NVIDIA,
      purchaseOptions: [PurchaseOption.ON_DEMAND],
    });
  }

  /**
   * Looks a catalogued instance type up by its EC2 name, case-insensitively.
   *
   * @throws when the name is not catalogued; the message lists the known names
   */
  public static fromName(name: string): AcceleratedInstanceType {
    const key = name.trim().toLowerCase();
    const found = AcceleratedInstanceType.all().find(t => t.name === key);
    if (!found) {
      const known = AcceleratedInstanceType.all().map(t => t.name).join(', ');
      throw new Error(`Unknown instance type '${name}'; known: ${known}, or use AcceleratedInstanceType.of({...})`);
    }
    return found;
  }

  /** The EC2 instance type name. */
  public readonly name: string;
  /** The accelerator device. */
  public readonly accelerator: Accelerator;
  /** Accelerator devices per instance. */
  public readonly acceleratorCount: number;
  /** vCPUs per instance. */
  public readonly vcpus: number;
  /** Host memory, GiB. */
  public readonly memoryGib: number;
  /** Local NVMe drives. */
  public readonly localNvmeCount: number;
  /** GB per local NVMe drive. */
  public readonly localNvmeGbEach: number;
  /** Total network bandwidth, Gbit/s. */
  public readonly networkBandwidthGbps: number;
  /** Network cards. */
  public readonly networkCards: number;
  /** Maximum EFA interfaces; 0 = no EFA. */
  public readonly maxEfaInterfaces: number;
  /** CPU architecture. */
  public readonly architecture: CpuArchitecture;
  /** EKS AMI type. */
  public readonly amiType: EksAmiType;
  /** How the capacity can be bought. */
  public readonly purchaseOptions: PurchaseOption[];
  /**
   * Instances per UltraServer.
   * @default - undefined: not an UltraServer type
   */
  public readonly ultraServerSize?: number;
  /**
   * Lowest EKS Kubernetes version that supports the type.
   * @default - undefined: every supported version
   */
  public readonly minKubernetesVersion?: string;
  /**
   * NeuronCores per device.
   * @default - undefined for GPUs
   */
  public readonly neuronCoresPerDevice?: number;
  /**
   * The Logical NeuronCore configurations the Neuron runtime accepts, its default first; empty for GPUs.
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html
   */
  public readonly logicalNeuronCoreConfigs: number[];
  /** Accelerator memory of the whole instance, GiB. */
  public readonly totalAcceleratorMemoryGib: number;
  /** Local NVMe of the whole instance, GB. */
  public readonly localNvmeTotalGb: number;
  /** Whether the type supports EFA. */
  public readonly supportsEfa: boolean;
  /** Whether the accelerator is an AWS Neuron device (Trainium / Inferentia). */
  public readonly isNeuron: boolean;
  /** The Kubernetes extended resource of one accelerator device: 'nvidia.com/gpu' or 'aws.amazon.com/neuron'. */
  public readonly acceleratorResourceName: string;
  /** The Kubernetes extended resource of one EFA interface (EFA device plugin). */
  public readonly efaResourceName: string;
  /** The instance family, e.g. 'p5en'. */
  public readonly family: string;

  private readonly efaOnlyCards: number[];
  private readonly efaOnCardZero: boolean;

  private constructor(props: AcceleratedInstanceTypeProps) {
    const name = (props.name ?? '').trim();
    if (!/^[a-z0-9-]+\.[a-z0-9-]+$/.test(name)) {
      throw new Error(`'name' ('${props.name}') must be an EC2 instance type name such as 'p5en.48xlarge' (lower case, family.size)`);
    }
    const where = `instance type '${name}'`;
    const positiveInt = (field: string, value: number) => {
      if (!(Number.isInteger(value) && value > 0)) {
        throw new Error(`${where}: '${field}' (${value}) must be a positive integer`);
      }
    };
    const nonNegative = (field: string, value: number, integer: boolean) => {
      if (!(Number.isFinite(value) && value >= 0 && (!integer || Number.isInteger(value)))) {
        throw new Error(`${where}: '${field}' (${value}) must be a non-negative ${integer ? 'integer' : 'number'}`);
      }
    };
    positiveInt('acceleratorCount', props.acceleratorCount);
    positiveInt('vcpus', props.vcpus);
    positiveInt('networkCards', props.networkCards);
    if (!(Number.isFinite(props.memoryGib) && props.memoryGib > 0)) {
      throw new Error(`${where}: 'memoryGib' (${props.memoryGib}) must be a positive number`);
    }
    if (!(Number.isFinite(props.networkBandwidthGbps) && props.networkBandwidthGbps > 0)) {
      throw new Error(`${where}: 'networkBandwidthGbps' (${props.networkBandwidthGbps}) must be a positive number`);
    }
    nonNegative('localNvmeCount', props.localNvmeCount, true);
    nonNegative('localNvmeGbEach', props.localNvmeGbEach, false);
    nonNegative('maxEfaInterfaces', props.maxEfaInterfaces, true);
    if (props.localNvmeCount > 0 && props.localNvmeGbEach === 0) {
      throw new Error(`${where}: 'localNvmeGbEach' (0) must be positive when 'localNvmeCount' is ${props.localNvmeCount}; set the drive size in GB`);
    }
    if (props.ultraServerSize !== undefined) positiveInt('ultraServerSize', props.ultraServerSize);
    if (props.neuronCoresPerDevice !== undefined) positiveInt('neuronCoresPerDevice', props.neuronCoresPerDevice);
    const isAws = props.accelerator.vendor === AcceleratorVendor.AWS;
    if (!isAws && (props.neuronCoresPerDevice !== undefined || props.logicalNeuronCoreConfigs !== undefined)) {
      throw new Error(`${where}: 'neuronCoresPerDevice' and 'logicalNeuronCoreConfigs' describe Neuron devices, not ${props.accelerator.name}; remove them`);
    }
    const lncs = [...(props.logicalNeuronCoreConfigs ?? (isAws ? [1] : []))];
    for (const lnc of lncs) {
      const cores = props.neuronCoresPerDevice ?? 1;
      if (!(Number.isInteger(lnc) && lnc >= 1 && cores % lnc === 0)) {
        throw new Error(`${where}: 'logicalNeuronCoreConfigs' entry ${lnc} must be a positive integer dividing the ${cores} NeuronCores of one device ('neuronCoresPerDevice')`);
      }
    }
    if (isAws && lncs.length === 0) {
      throw new Error(`${where}: 'logicalNeuronCoreConfigs' must list at least one LNC; omit it for [1]`);
    }
    if (props.minKubernetesVersion !== undefined && !/^1\.\d+$/.test(props.minKubernetesVersion)) {
      throw new Error(`${where}: 'minKubernetesVersion' ('${props.minKubernetesVersion}') must look like '1.33'`);
    }

    // AMI must match the CPU architecture and the accelerator driver family.
    const isNeuron = props.accelerator.vendor === AcceleratorVendor.AWS;
    const expectedAmi = isNeuron
      ? (props.architecture === CpuArchitecture.X86_64 ? EksAmiType.AL2023_X86_64_NEURON : undefined)
      : (props.architecture === CpuArchitecture.X86_64 ? EksAmiType.AL2023_X86_64_NVIDIA : EksAmiType.AL2023_ARM_64_NVIDIA);
    if (expectedAmi === undefined) {
      throw new Error(`${where}: Neuron devices are only served by the x86_64 Neuron AMI; set 'architecture' to X86_64`);
    }
    if (props.amiType !== expectedAmi) {
      throw new Error(`${where}: 'amiType' (${props.amiType}) does not match a ${props.architecture} ${props.accelerator.vendor} instance; use ${expectedAmi}`);
    }

    // EFA layout.
    const supportsEfa = props.maxEfaInterfaces > 0;
    // Default: one efa-only per card, within the EFA budget (card 0 then takes the last one).
    const defaultCards = supportsEfa ? range(1, Math.min(props.networkCards, props.maxEfaInterfaces)) : [];
    const efaOnlyCards = [...(props.efaOnlyCards ?? defaultCards)];
    for (const card of efaOnlyCards) {
      if (!(Number.isInteger(card) && card >= 1 && card < props.networkCards)) {
        throw new Error(`${where}: 'efaOnlyCards' entry ${card} must be a network card index from 1 to ${props.networkCards - 1}; card 0 is set by 'efaOnCardZero'`);
      }
    }
    if (new Set(efaOnlyCards).size !== efaOnlyCards.length) {
      throw new Error(`${where}: 'efaOnlyCards' (${efaOnlyCards.join(', ')}) lists a card twice; list each card once`);
    }
    efaOnlyCards.sort((a, b) => a - b);
    const efaOnCardZero = props.efaOnCardZero ?? (supportsEfa && props.maxEfaInterfaces > efaOnlyCards.length);
    const efaCount = efaOnlyCards.length + (efaOnCardZero ? 1 : 0);
    if (efaCount > props.maxEfaInterfaces) {
      throw new Error(`${where}: the EFA layout needs ${efaCount} EFA interfaces ('efaOnlyCards' ${efaOnlyCards.length}` +
        `${efaOnCardZero ? ' + card 0' : ''}) but 'maxEfaInterfaces' is ${props.maxEfaInterfaces}; list fewer cards or raise 'maxEfaInterfaces'`);
    }

    const purchaseOptions = [...(props.purchaseOptions ?? ALL_PURCHASE_OPTIONS)];
    if (purchaseOptions.length === 0) {
      throw new Error(`${where}: 'purchaseOptions' must list at least one option; omit it to allow all`);
    }

    this.name = name;
    this.accelerator = props.accelerator;
    this.acceleratorCount = props.acceleratorCount;
    this.vcpus = props.vcpus;
    this.memoryGib = props.memoryGib;
    this.localNvmeCount = props.localNvmeCount;
    this.localNvmeGbEach = props.localNvmeGbEach;
    this.networkBandwidthGbps = props.networkBandwidthGbps;
    this.networkCards = props.networkCards;
    this.maxEfaInterfaces = props.maxEfaInterfaces;
    this.architecture = props.architecture;
    this.amiType = props.amiType;
    this.purchaseOptions = purchaseOptions;
    this.ultraServerSize = props.ultraServerSize;
    this.minKubernetesVersion = props.minKubernetesVersion;
    this.neuronCoresPerDevice = props.neuronCoresPerDevice;
    this.logicalNeuronCoreConfigs = lncs;
    this.totalAcceleratorMemoryGib = props.accelerator.memoryGib * props.acceleratorCount;
    this.localNvmeTotalGb = props.localNvmeCount * props.localNvmeGbEach;
    this.supportsEfa = supportsEfa;
    this.isNeuron = isNeuron;
    this.acceleratorResourceName = isNeuron ? 'aws.amazon.com/neuron' : 'nvidia.com/gpu';
    this.efaResourceName = 'vpc.amazonaws.com/efa';
    this.family = name.split('.')[0];
    this.efaOnlyCards = efaOnlyCards;
    this.efaOnCardZero = efaOnCardZero;
  }

  /**
   * The network interfaces of a launch template for this type, in launch-template order:
   * card 0 device 0 is the ENA primary (`interface`); when card 0 supports EFA an `efa-only` interface
   * follows on card 0 device 1; then one `efa-only` interface at device 0 of every EFA card.
   * `efa-only` interfaces take no IP addresses, so pod IP capacity stays on the primary ENI.
   *
   * @see https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html
   */
  public networkInterfaceLayout(): NetworkInterfaceSlot[] {
    const slots: NetworkInterfaceSlot[] = [
      { networkCardIndex: 0, deviceIndex: 0, interfaceType: NetworkInterfaceType.INTERFACE },
    ];
    if (this.efaOnCardZero) {
      slots.push({ networkCardIndex: 0, deviceIndex: 1, interfaceType: NetworkInterfaceType.EFA_ONLY });
    }
    for (const card of this.efaOnlyCards) {
      slots.push({ networkCardIndex: card, deviceIndex: 0, interfaceType: NetworkInterfaceType.EFA_ONLY });
    }
    return slots;
  }

  /**
   * The NeuronCores one Neuron device exposes to software at a Logical NeuronCore configuration: the
   * unit in which Neuron's vLLM counts `--tensor-parallel-size` (trn2.48xlarge: 4 per device and 64 per
   * instance at LNC 2, 8 and 128 at LNC 1; trn1: 2 per device).
   *
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/general/arch/neuron-features/logical-neuroncore-config.html
   * @param lnc the Logical NeuronCore configuration; one of `logicalNeuronCoreConfigs` (default: the first)
   * @throws for a GPU type, or an LNC the type does not support
   */
  public logicalNeuronCoresPerDevice(lnc?: number): number {
    if (!this.isNeuron) {
      throw new Error(`${this.name} has ${this.accelerator.name} GPUs, not Neuron devices: it has no NeuronCores`);
    }
    const config = lnc ?? this.logicalNeuronCoreConfigs[0];
    if (!this.logicalNeuronCoreConfigs.includes(config)) {
      throw new Error(`Logical NeuronCore configuration ${config} is not supported on ${this.name}; use ${this.logicalNeuronCoreConfigs.join(' or ')}`);
    }
    return (this.neuronCoresPerDevice ?? 1) / config;
  }

  /**
   * The EFA interfaces a pod that uses `accelerators` of this node's devices should request: its
   * proportional share of the node's EFA interfaces (rounded down, so pods packed on one node never ask
   * for more than the node has), at least 1 when the type has EFA, all of them for a whole node;
   * 0 when the type has no EFA.
   *
   * @param accelerators devices per pod, 1 .. acceleratorCount
   * @throws when `accelerators` is not an integer from 1 to acceleratorCount
   */
  public efaInterfacesFor(accelerators: number): number {
    if (!(Number.isInteger(accelerators) && accelerators >= 1 && accelerators <= this.acceleratorCount)) {
      throw new Error(`'accelerators' (${accelerators}) must be an integer from 1 to ${this.acceleratorCount}, the devices of one ${this.name}`);
    }
    const total = this.efaInterfaceCount();
    if (total === 0) {
      return 0;
    }
    return Math.max(1, Math.floor((total * accelerators) / this.acceleratorCount));
  }

  /**
   * The EFA interface counts that give a pod with `accelerators` of this node's devices an even share:
   * each count divides the pod's device count (several devices share one interface) or is a multiple of
   * it (every device gets the same number), and pods packed on one node fit in the node's interfaces
   * together. The pod's default share ({@link efaInterfacesFor}) is always included. Empty when the type
   * has no EFA; a pod may always request none.
   *
   * @param accelerators devices per pod, 1 .. acceleratorCount
   * @throws when `accelerators` is not an integer from 1 to acceleratorCount
   */
  public efaInterfaceChoices(accelerators: number): number[] {
    const share = this.efaInterfacesFor(accelerators);
    if (share === 0) {
      return [];
    }
    const podsPerNode = Math.floor(this.acceleratorCount / accelerators);
    const limit = Math.max(share, Math.floor(this.efaInterfaceCount() / podsPerNode));
    const choices: number[] = [];
    for (let n = 1; n <= limit; n++) {
      if (accelerators % n === 0 || n % accelerators === 0 || n === share) {
        choices.push(n);
      }
    }
    return choices;
  }

  /**
   * Whether capacity of this type can be bought with the given option.
   */
  public supportsPurchaseOption(option: PurchaseOption): boolean {
    return this.purchaseOptions.includes(option);
  }

  /** The EC2 name. */
  public toString(): string {
    return this.name;
  }

  private efaInterfaceCount(): number {
    return this.efaOnlyCards.length + (this.efaOnCardZero ? 1 : 0);
  }
}

function range(from: number, to: number): number[] {
  const out: number[] = [];
  for (let i = from; i < to; i++) out.push(i);
  return out;
}
