/**
 * Switch and version of one cluster add-on.
 */
export interface AddonOptions {
  /**
   * Install the add-on.
   *
   * @default true
   */
  readonly enabled?: boolean;

  /**
   * The version to install: the EKS add-on version (`v1.20.4-eksbuild.1`), the Helm chart version
   * (`0.18.0`) or the release tag, depending on the add-on.
   *
   * @default - the version pinned in {@link AddonVersions}
   */
  readonly version?: string;
}

/** Scheme of the load balancer in front of the Istio ingress gateway. */
export enum LoadBalancerScheme {
  /** Reachable only from inside the VPC (and peered networks). */
  INTERNAL = 'internal',
  /** Reachable from the internet. */
  INTERNET_FACING = 'internet-facing',
}

/** Options of the Istio add-on (base, istiod and an ingress gateway). */
export interface IstioOptions extends AddonOptions {
  /**
   * Install Istio's ingress gateway chart behind an AWS Network Load Balancer.
   *
   * @default true
   */
  readonly ingressGateway?: boolean;

  /**
   * Scheme of the ingress gateway's Network Load Balancer.
   *
   * @default LoadBalancerScheme.INTERNAL
   */
  readonly ingressScheme?: LoadBalancerScheme;
}

/**
 * The add-ons of an {@link InferenceCluster}. Each is pinned (see {@link AddonVersions}) and can be
 * switched off or moved to another version.
 */
export interface InferenceClusterAddons {
  /**
   * Amazon VPC CNI as an EKS add-on (>= 1.18.5 is required for `efa-only` interfaces).
   *
   * @default - enabled, AddonVersions.VPC_CNI
   * @see https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html
   */
  readonly vpcCni?: AddonOptions;

  /**
   * EKS Pod Identity agent as an EKS add-on (the Load Balancer Controller gets its role through it).
   *
   * @default - enabled, AddonVersions.POD_IDENTITY_AGENT
   */
  readonly podIdentityAgent?: AddonOptions;

  /**
   * AWS Load Balancer Controller (Helm chart from eks-charts) with a Pod Identity role.
   *
   * @default - enabled, AddonVersions.LOAD_BALANCER_CONTROLLER
   */
  readonly loadBalancerController?: AddonOptions;

  /**
   * NVIDIA device plugin (Helm chart), with MOFED disabled: EFA, not Mellanox OFED, carries RDMA on EC2.
   *
   * @default - enabled, AddonVersions.NVIDIA_DEVICE_PLUGIN
   */
  readonly nvidiaDevicePlugin?: AddonOptions;

  /**
   * EFA device plugin (Helm chart `aws-efa-k8s-device-plugin` from eks-charts).
   *
   * @default - enabled, AddonVersions.EFA_DEVICE_PLUGIN
   */
  readonly efaDevicePlugin?: AddonOptions;

  /**
   * Neuron device plugin (Helm OCI chart); installed only once a Trainium node group is added.
   *
   * @default - enabled, AddonVersions.NEURON_HELM_CHART
   */
  readonly neuronDevicePlugin?: AddonOptions;

  /**
   * LeaderWorkerSet controller (Helm OCI chart), used by multi-node pools.
   *
   * @default - enabled, AddonVersions.LEADER_WORKER_SET
   */
  readonly leaderWorkerSet?: AddonOptions;

  /**
   * Gateway API standard-channel CRDs (version = Envoy Gateway's `gateway-crds-helm` chart version
   * that bundles the wanted Gateway API release).
   *
   * @default - enabled, AddonVersions.GATEWAY_API_CRDS_CHART (Gateway API v1.4.0)
   */
  readonly gatewayApiCrds?: AddonOptions;

  /**
   * Gateway API Inference Extension CRDs (version = release tag, e.g. `v1.6.0`).
   *
   * @default - enabled, AddonVersions.INFERENCE_EXTENSION
   */
  readonly inferenceExtensionCrds?: AddonOptions;

  /**
   * Istio: base, istiod with the Gateway API Inference Extension turned on, and an ingress gateway.
   *
   * @default - enabled, AddonVersions.ISTIO, internal NLB
   */
  readonly istio?: IstioOptions;
}

/**
 * The versions this library pins by default. Bump them here, in one place.
 */
export class AddonVersions {
  /**
   * Amazon VPC CNI EKS add-on. `efa-only` interfaces need >= 1.18.5 (EKS node-efa docs);
   * v1.20.4 is a build EKS offers for Kubernetes 1.34 (`aws eks describe-addon-versions`).
   */
  public static readonly VPC_CNI = 'v1.20.4-eksbuild.1';

  /** EKS Pod Identity agent EKS add-on. */
  public static readonly POD_IDENTITY_AGENT = 'v1.3.9-eksbuild.5';

  /** Helm chart `aws-load-balancer-controller` 1.17.1 (controller v2.17.1; aws-cdk-lib 2.276 AlbControllerVersion table). */
  public static readonly LOAD_BALANCER_CONTROLLER = '1.17.1';

  /** Helm chart `nvidia-device-plugin` (NVIDIA/k8s-device-plugin; image nvcr.io/nvidia/k8s-device-plugin:v0.18.0). */
  public static readonly NVIDIA_DEVICE_PLUGIN = '0.18.0';

  /** Helm chart `aws-efa-k8s-device-plugin` (aws/eks-charts stable/aws-efa-k8s-device-plugin/Chart.yaml). */
  public static readonly EFA_DEVICE_PLUGIN = 'v0.5.15';

  /** Helm chart `oci://public.ecr.aws/neuron/neuron-helm-chart` (aws-neuron/neuron-helm-charts). */
  public static readonly NEURON_HELM_CHART = '1.1.2';

  /** Helm chart `oci://registry.k8s.io/lws/charts/lws` (LeaderWorkerSet v0.10.0, the API the workloads target). */
  public static readonly LEADER_WORKER_SET = '0.10.0';

  /**
   * Helm chart `oci://docker.io/envoyproxy/gateway-crds-helm`: Envoy Gateway v1.6 compiles in
   * Gateway API v1.4.0 (Envoy Gateway compatibility matrix); only its Gateway API part is installed.
   */
  public static readonly GATEWAY_API_CRDS_CHART = 'v1.6.3';

  /** Gateway API Inference Extension release (InferencePool `inference.networking.k8s.io/v1`). */
  public static readonly INFERENCE_EXTENSION = 'v1.6.0';

  /** Istio Helm charts `base`, `istiod`, `gateway` (Istio >= 1.28 serves InferencePool v1). */
  public static readonly ISTIO = '1.28.0';

  /** Image that applies the Inference Extension CRDs in the cluster (shell-less official kubectl image). */
  public static readonly KUBECTL_IMAGE = 'registry.k8s.io/kubectl:v1.34.1';

  private constructor() {}
}
