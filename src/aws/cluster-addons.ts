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
   * The version to install: the EKS add-on version (`v1.22.4-eksbuild.3`), the Helm chart version
   * (`0.20.0`) or the release tag, depending on the add-on.
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
 * Options of the Cluster Autoscaler add-on. `version` is the Helm chart version of `cluster-autoscaler`
 * (https://kubernetes.github.io/autoscaler).
 */
export interface ClusterAutoscalerOptions extends AddonOptions {
  /**
   * Tag of the Cluster Autoscaler image (`registry.k8s.io/autoscaling/cluster-autoscaler`), e.g.
   * `v1.35.2`. Its minor must be the cluster's Kubernetes minor (an error otherwise). Needed, with
   * `version`, for a Kubernetes version this library has no pin for.
   *
   * @default - the pin for the cluster's Kubernetes minor (1.35: AddonVersions.CLUSTER_AUTOSCALER_IMAGE)
   * @see https://github.com/kubernetes/autoscaler/tree/master/cluster-autoscaler#releases
   */
  readonly imageTag?: string;
}

/**
 * The add-ons of an {@link InferenceCluster}. Each is pinned (see {@link AddonVersions}) and can be
 * switched off or moved to another version.
 */
export interface InferenceClusterAddons {
  /**
   * Amazon VPC CNI as an EKS add-on (>= 1.18.5 is required for `efa-only` interfaces), with its network
   * policy agent on (`enableNetworkPolicy`), which enforces the NetworkPolicies of the workloads
   * (`NetworkIsolation`). Off, bring a CNI that enforces NetworkPolicies, or they are inert.
   *
   * @default - enabled, AddonVersions.VPC_CNI
   * @see https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html
   */
  readonly vpcCni?: AddonOptions;

  /**
   * CoreDNS as an EKS add-on, taking over the copy EKS installs at cluster creation, so that it is
   * updated with the cluster and its version is in the template. `version` is an EKS add-on version
   * (`aws eks describe-addon-versions --addon-name coredns`).
   *
   * @default - enabled, the add-on's default version for the cluster's Kubernetes version
   * @see https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html
   */
  readonly coreDns?: AddonOptions;

  /**
   * kube-proxy as an EKS add-on, taking over the copy EKS installs at cluster creation. `version` is an
   * EKS add-on version (`aws eks describe-addon-versions --addon-name kube-proxy`).
   *
   * @default - enabled, the add-on's default version for the cluster's Kubernetes version
   * @see https://docs.aws.amazon.com/eks/latest/userguide/managing-kube-proxy.html
   */
  readonly kubeProxy?: AddonOptions;

  /**
   * EKS Pod Identity agent as an EKS add-on (the Load Balancer Controller gets its role through it).
   *
   * @default - enabled, AddonVersions.POD_IDENTITY_AGENT
   */
  readonly podIdentityAgent?: AddonOptions;

  /**
   * EKS node monitoring agent as an EKS add-on (`eks-node-monitoring-agent`): it turns GPU XID and
   * DCGM errors, Neuron, EFA/networking, storage and kernel faults into NodeConditions such as
   * `AcceleratedHardwareReady`, which node auto repair of managed node groups acts on. `version` is an
   * EKS add-on version (`aws eks describe-addon-versions --addon-name eks-node-monitoring-agent`).
   *
   * @default - enabled, the add-on's default version for the cluster's Kubernetes version
   * @see https://docs.aws.amazon.com/eks/latest/userguide/node-health.html
   */
  readonly nodeMonitoringAgent?: AddonOptions;

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
   * NVIDIA DRA driver for GPUs (Helm OCI chart `dra-driver-nvidia-gpu`) with ComputeDomains only: it runs
   * the IMEX daemons that give the pods of one ComputeDomain Multi-Node NVLink across the nodes of a
   * p6e-gb200 UltraServer, which EKS requires DRA for. GPUs stay with the NVIDIA device plugin
   * (`nvidia.com/gpu`): the chart's GPU allocation is left off. A second release of the device plugin
   * chart runs GPU Feature Discovery (with Node Feature Discovery), which puts the `nvidia.com/gpu.clique`
   * label (the NVLink partition) on the nodes that placement uses. Needs Kubernetes 1.33 or later.
   *
   * Unset, it is installed with the first p6e-gb200 node group; `enabled: true` installs it on any
   * cluster, `enabled: false` never (workloads with a ComputeDomain then fail in `addWorkload`).
   *
   * @default - installed when the cluster gets a p6e-gb200 node group, AddonVersions.NVIDIA_DRA_DRIVER
   * @see https://docs.aws.amazon.com/eks/latest/userguide/ml-eks-nvidia-ultraserver.html
   * @see https://github.com/kubernetes-sigs/dra-driver-nvidia-gpu/blob/v0.4.0/docs/install.md
   */
  readonly nvidiaDraDriver?: AddonOptions;

  /**
   * EFA DRA driver (DRANET, Helm chart `aws-dranet` from eks-charts), which publishes EFA devices as
   * DRA `ResourceSlice`s of DeviceClass `efa.networking.k8s.aws` for workloads that claim them with a
   * `ResourceClaimTemplate`. The pools of this library request EFA from the device plugin
   * (`vpc.amazonaws.com/efa`), so keep `efaDevicePlugin` for them. Needs Kubernetes 1.34 or later.
   *
   * Off unless given: `{}` or `{ enabled: true }` installs it.
   *
   * @default - not installed
   * @see https://docs.aws.amazon.com/eks/latest/userguide/device-management-efa.html
   */
  readonly efaDraDriver?: AddonOptions;

  /**
   * Neuron DRA driver (the Neuron Helm chart with `draDriver.enabled`), which publishes Trainium devices
   * as DRA `ResourceSlice`s of DeviceClass `neuron.aws.com` (connected subsets of 1, 4, 8 or 16 devices,
   * LNC per claim). It cannot run next to the Neuron device plugin on a node, so it requires
   * `neuronDevicePlugin: { enabled: false }`; pools that request `aws.amazon.com/neuron` then have no
   * device plugin and `addWorkload` rejects them. Needs Kubernetes 1.34 or later.
   *
   * Off unless given: `{}` or `{ enabled: true }` installs it; its `version` is the Neuron Helm chart's.
   *
   * @default - not installed
   * @see https://docs.aws.amazon.com/eks/latest/userguide/device-management-neuron.html
   * @see https://awsdocs-neuron.readthedocs-hosted.com/en/latest/containers/neuron-dra.html
   */
  readonly neuronDraDriver?: AddonOptions;

  /**
   * LeaderWorkerSet controller (Helm OCI chart), used by multi-node pools.
   *
   * @default - enabled, AddonVersions.LEADER_WORKER_SET
   */
  readonly leaderWorkerSet?: AddonOptions;

  /**
   * KEDA (Helm chart `keda` from https://kedacore.github.io/charts, namespace `keda`), which runs the
   * ScaledObjects of pools with `autoscaling` (`Autoscaler.KEDA`): its operator polls the router's
   * `/scaling` and drives an HPA per pool, and scales pools to zero and back. Its pods run on the system
   * nodes, non-root. Installed by default, as a workload's autoscaling needs it and it is small; switch
   * it off when another component already serves `external.metrics.k8s.io` (e.g. prometheus-adapter for
   * `Autoscaler.HPA`: one APIService serves that group per cluster) or when KEDA is installed otherwise.
   * A workload with a ScaledObject on a cluster with `keda: { enabled: false }` fails in `addWorkload`.
   *
   * @default - enabled, AddonVersions.KEDA
   * @see https://keda.sh/docs/2.20/deploy/#helm
   */
  readonly keda?: AddonOptions;

  /**
   * Kubernetes Cluster Autoscaler (Helm chart `cluster-autoscaler` from https://kubernetes.github.io/autoscaler,
   * namespace `kube-system`, on the system nodes), which grows the accelerated managed node groups when
   * an autoscaled pool's new replicas are Pending and removes their nodes once empty, between each
   * group's `minSize` and `maxSize`. It finds the groups by the tags EKS puts on their Auto Scaling
   * groups, scales a group up from zero nodes from the group's labels, taints and node-template resource
   * tags (`eks:DescribeNodegroup`), and gets its role through EKS Pod Identity (Auto Scaling writes only
   * on groups tagged with this cluster's `eks:cluster-name`). Its minor follows the cluster's Kubernetes
   * minor (pins for 1.32 to 1.36; another version needs `version` and `imageTag`). Flags:
   * `--expander=least-waste`, `--balance-similar-node-groups`, `--skip-nodes-with-local-storage=true`
   * (it removes empty nodes and never evicts a serving worker to pack nodes), and
   * `--max-graceful-termination-sec` at least the longest `terminationGracePeriodSeconds` of the
   * workloads (and at least its default, 600). Non-root, read-only root filesystem, requests set.
   *
   * Unset, it is installed once the cluster has both an accelerated managed node group and a workload
   * with a KEDA ScaledObject or HorizontalPodAutoscaler (in either order), unless the cluster has
   * Karpenter NodePools (Karpenter then scales the nodes). `enabled: true` installs it on any cluster;
   * `enabled: false` never (`addWorkload` then warns `disagg:nodeAutoscaling` for autoscaled workloads).
   *
   * Every managed node group of the cluster is discovered, the system group included (within its own
   * min and max). EKS leaves a node group's desired size to the Cluster Autoscaler; a stack update that
   * changes `desiredSize` resets it.
   *
   * @default - installed with the first autoscaled workload on managed node groups; chart and image pinned per Kubernetes minor
   * @see https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/cloudprovider/aws/README.md
   * @see https://docs.aws.amazon.com/eks/latest/best-practices/cas.html
   */
  readonly clusterAutoscaler?: ClusterAutoscalerOptions;

  /**
   * Gateway API standard-channel CRDs (version = Envoy Gateway's `gateway-crds-helm` chart version
   * that bundles the wanted Gateway API release).
   *
   * @default - enabled, AddonVersions.GATEWAY_API_CRDS_CHART (Gateway API v1.6.1)
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
 * The versions this library pins by default. Bump them here, in one place; each pin names where it
 * was confirmed to exist.
 */
export class AddonVersions {
  /**
   * Amazon VPC CNI EKS add-on. `efa-only` interfaces need >= 1.18.5 (EKS node-efa docs).
   * Source: the version table of https://docs.aws.amazon.com/eks/latest/userguide/managing-vpc-cni.html
   * lists v1.22.4-eksbuild.3 for Kubernetes 1.31 through 1.36 (as quoted, checked 2026-08-20, in a
   * public repository; the AWS page itself was not reachable here), and public Terraform pins name it
   * the `defaultVersion` for 1.34 and 1.36 (`describe-addon-versions`, 2026-08/09). The upstream tag
   * aws/amazon-vpc-cni-k8s v1.22.4 is of 2026-07-08. Newer builds exist (v1.23.0-eksbuild.1 is
   * installed on 1.35 clusters in public configs; tag v1.23.0, 2026-07-31) but were not yet the version
   * the AWS table lists. Confirm with
   * `aws eks describe-addon-versions --addon-name vpc-cni --kubernetes-version 1.35`.
   */
  public static readonly VPC_CNI = 'v1.22.4-eksbuild.3';

  /**
   * EKS Pod Identity agent EKS add-on.
   * Source: no AWS page lists this add-on's versions per Kubernetes version. Public Terraform pins
   * record v1.3.10-eksbuild.3 as the `defaultVersion` of `aws eks describe-addon-versions` for 1.34
   * (2026-06-24) and 1.36 (2026-08-27), and clusters on 1.35 run it. A newer build, v1.4.0-eksbuild.1,
   * is listed for 1.35 in public configs but was not the default; it is not adopted. Confirm with
   * `aws eks describe-addon-versions --addon-name eks-pod-identity-agent --kubernetes-version 1.35`.
   */
  public static readonly POD_IDENTITY_AGENT = 'v1.3.10-eksbuild.3';

  /**
   * Helm chart `aws-load-balancer-controller` 1.17.1 (controller v2.17.1), kept.
   * Source: aws/eks-charts gh-pages index.yaml (generated 2026-08-03): 1.17.1 / v2.17.1 (2026-01-09) is
   * the last chart of the v2 controller; since 3.0.0 (2026-01-23) the chart follows the controller
   * (3.5.0 / v3.5.0 on 2026-08-03), and the IAM policy here follows the v2 controller. aws-cdk-lib's
   * `AlbControllerVersion.V2_17_1` maps to the same chart. The chart declares no `kubeVersion`; that
   * v2.17.1 supports Kubernetes 1.35 was not confirmed from a source reachable here.
   */
  public static readonly LOAD_BALANCER_CONTROLLER = '1.17.1';

  /**
   * Helm chart `nvidia-device-plugin` from https://nvidia.github.io/k8s-device-plugin.
   * Source: NVIDIA/k8s-device-plugin tag v0.20.0 (2026-08-19), listed in the gh-pages index.yaml of
   * 2026-08-20: Chart.yaml has kubeVersion `>= 1.10.0-0` and the plugin is built on k8s.io/kubelet
   * v0.36.3; a public EKS report has it exposing GPUs on Kubernetes 1.35.7 (2026-09-10). The chart
   * value `mofedEnabled` (a bool) still becomes MOFED_ENABLED (templates/daemonset-device-plugin.yml);
   * v0.19.0 turned MOFED on by default and v0.19.3 reverted that, so it stays set explicitly. GFD
   * (`gfd.enabled`, `nfd.worker.tolerations`) keeps its value paths.
   */
  public static readonly NVIDIA_DEVICE_PLUGIN = '0.20.0';

  /**
   * Helm chart `aws-efa-k8s-device-plugin` from https://aws.github.io/eks-charts.
   * Source: aws/eks-charts pull request #1363 (merged 2026-08-21, release v0.0.243 of 2026-08-21) moves
   * the image to v0.5.21-eksbuild.9 and the chart to v0.5.31; a public EKS report (2026-09-10) has
   * chart v0.5.31 exposing EFA devices on Kubernetes 1.35.7. The supported-instance list (p5en,
   * p6-b200, p6e-gb200, trn2, trn2u) was read in v0.5.30, the last chart in the snapshot here
   * (2026-08-07). PR #1366 (2026-09-10) bumps the image to v0.5.21-eksbuild.13 in a later chart whose
   * version could not be read here.
   */
  public static readonly EFA_DEVICE_PLUGIN = 'v0.5.31';

  /**
   * Helm chart `oci://public.ecr.aws/neuron/neuron-helm-chart`, kept.
   * Source: the aws-neuron/neuron-helm-charts releases page lists 1.10.0 (2026-08-19) as the latest,
   * after 1.9.0 for Neuron SDK 2.31; a public install of 2026-09-11 still pulls 1.10.0 by default.
   * `helm show values ... --version 1.10.0` shows device plugin 2.32.0.0, trn2/trn2u in
   * `neuronInstances` and the `npd.enabled` switch used here. Neuron SDK 2.33.0 (2026-10-19) may come
   * with a later chart, which was not found here; Kubernetes 1.35 support is not stated by the chart.
   */
  public static readonly NEURON_HELM_CHART = '1.10.0';

  /**
   * Helm chart `oci://registry.k8s.io/dra-driver-nvidia/charts/dra-driver-nvidia-gpu` 0.4.0 (DRA Driver for
   * NVIDIA GPUs, ComputeDomain API `resource.nvidia.com/v1beta1`).
   * Source: kubernetes-sigs/dra-driver-nvidia-gpu (formerly NVIDIA/k8s-dra-driver-gpu) tag v0.4.0,
   * docs/install.md (`helm install ... --version 0.4.0`; `resources.computeDomains.enabled`,
   * `resources.gpus.enabled`) and deployments/helm/dra-driver-nvidia-gpu/Chart.yaml (version 0.4.0,
   * kubeVersion >= 1.32). From 0.4.0 the chart is SemVer without a `v` and also published on NGC.
   */
  public static readonly NVIDIA_DRA_DRIVER = '0.4.0';

  /**
   * Helm chart `aws-dranet` from https://aws.github.io/eks-charts (EFA DRA driver, image v1.2.0-eksbuild.2).
   * Source: aws/eks-charts stable/aws-dranet/Chart.yaml (version 1.0.0) and the gh-pages index.yaml
   * (aws-dranet-1.0.0.tgz, 2026-08-03); its templates create DeviceClass `efa.networking.k8s.aws`
   * (resource.k8s.io/v1) and its node affinity lists p5en, p6-b200, p6e-gb200 and trn2.
   */
  public static readonly EFA_DRA_DRIVER = '1.0.0';

  /**
   * Helm chart `oci://registry.k8s.io/lws/charts/lws`, LeaderWorkerSet v0.10.0 (the API the workloads target).
   * Source: kubernetes-sigs/lws site docs (installation, v0.10.0): `helm install lws
   * oci://registry.k8s.io/lws/charts/lws --version=0.10.0`; it needs Kubernetes >= 1.33.
   */
  public static readonly LEADER_WORKER_SET = '0.10.0';

  /**
   * Helm chart `keda` 2.20.2 from https://kedacore.github.io/charts (KEDA v2.20.2; ScaledObject
   * `keda.sh/v1alpha1`, whose CRD of that release validates the constructs' ScaledObjects in tests:
   * ../shared/schemas/crds/keda-v2.20.2_scaledobjects.yaml).
   * Source: KEDA's deployment docs and public install guides give `helm install keda kedacore/keda
   * --version 2.20.2 --namespace keda --create-namespace` and the release asset keda-2.20.2.yaml; the
   * chart version follows the KEDA release. The chart's own Chart.yaml for 2.20.2 was not readable here.
   */
  public static readonly KEDA = '2.20.2';

  /**
   * Helm chart `cluster-autoscaler` 9.59.0 from https://kubernetes.github.io/autoscaler, for Kubernetes
   * 1.35 (and 1.36, with the 1.36 image); other minors have their own pins (src/aws/private/cluster-autoscaler.ts).
   * Source: kubernetes/autoscaler tag cluster-autoscaler-chart-9.59.0 (2026-07-21),
   * cluster-autoscaler/charts/cluster-autoscaler/Chart.yaml: version 9.59.0, appVersion 1.35.0; listed in
   * the repository's gh-pages index.yaml (2026-07-26). The newest chart as of 2026-08-22 (master's Chart.yaml).
   */
  public static readonly CLUSTER_AUTOSCALER_CHART = '9.59.0';

  /**
   * Cluster Autoscaler image tag for Kubernetes 1.35 (`registry.k8s.io/autoscaling/cluster-autoscaler`).
   * Source: kubernetes/autoscaler tag cluster-autoscaler-1.35.2 (2026-07-22), the newest 1.35 patch; the
   * 9.59.0 chart defaults to v1.35.0.
   */
  public static readonly CLUSTER_AUTOSCALER_IMAGE = 'v1.35.2';

  /**
   * Helm chart `oci://docker.io/envoyproxy/gateway-crds-helm` v1.9.0; only its Gateway API part
   * (`crds.gatewayAPI`, standard channel) is installed.
   * Source: envoyproxy/gateway tag v1.9.0 (2026-08-15): go.mod has sigs.k8s.io/gateway-api v1.6.1, the
   * chart's standard CRDs carry `gateway.networking.k8s.io/bundle-version: v1.6.1` (with the
   * `safe-upgrades` ValidatingAdmissionPolicy that refuses a later downgrade to v1.5 or older), and its
   * compatibility matrix (site/content/en/news/releases/matrix.md) lists Kubernetes 1.33-1.36 for v1.9
   * where v1.6 listed 1.30-1.33. Istio 1.31 is built on sigs.k8s.io/gateway-api v1.6.0 (istio/istio
   * 1.31.0-rc.0 go.mod). Gateway and HTTPRoute stay `gateway.networking.k8s.io/v1`.
   */
  public static readonly GATEWAY_API_CRDS_CHART = 'v1.9.0';

  /**
   * Gateway API Inference Extension release (InferencePool `inference.networking.k8s.io/v1`).
   * Source: kubernetes-sigs/gateway-api-inference-extension tag v1.6.0: `make artifacts` builds
   * `manifests.yaml` (every CRD), `v1-manifests.yaml` and `experimental-manifests.yaml`, and the release
   * checklist has the `manifests.yaml` asset applied after publishing; the CRD Job applies `manifests.yaml`.
   */
  public static readonly INFERENCE_EXTENSION = 'v1.6.0';

  /**
   * Istio Helm charts `base`, `istiod`, `gateway` at https://istio-release.storage.googleapis.com/charts.
   * Source: istio.io release notes (istio/istio.io content/en/news/releases): 1.31.0 was published
   * 2026-08-20 and is supported on Kubernetes 1.32-1.36; 1.31.1 (2026-09-21) is the latest patch found,
   * with the GHSA-qm8v-g4f9-qhjx BackendTLSPolicy fix. Istio supports a minor release until 6 weeks after
   * the N+2 minor (https://istio.io/latest/docs/releases/supported-releases/#support-policy), so 1.28 left
   * support about 6 weeks after 1.30.0 (2026-05-18) and 1.29 about 6 weeks after 1.31.0. InferencePool v1
   * (since 1.28.0) and several `targetPorts` per pool (since 1.28.1) carry over; istiod still reads
   * `ENABLE_GATEWAY_API_INFERENCE_EXTENSION`.
   */
  public static readonly ISTIO = '1.31.1';

  /**
   * Image that applies the Inference Extension CRDs in the cluster and waits for them to be
   * established (shell-less official kubectl image), matching the default Kubernetes version 1.35
   * (kubectl supports one minor version of skew: https://kubernetes.io/releases/version-skew-policy/#kubectl).
   * Source: registry.k8s.io/kubectl:v1.35.1 is pinned by digest in public image lists
   * (sha256:c93e4fb811b3217ef69ee7a79a9a15fb277887cd1c3002fbe154e676037a274a).
   */
  public static readonly KUBECTL_IMAGE = 'registry.k8s.io/kubectl:v1.35.1';

  private constructor() {}
}
