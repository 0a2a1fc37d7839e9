/**
 * Options of {@link GatewayExposure.gateway}.
 */
export interface NewGatewayOptions {
  /**
   * The GatewayClass that implements the Gateway.
   * @default 'istio'
   */
  readonly gatewayClassName?: string;
  /**
   * HTTP listener port.
   * @default 80
   */
  readonly port?: number;
  /**
   * Host names the route answers for.
   * @default - every host name
   */
  readonly hostnames?: string[];
  /**
   * Scheme of the AWS Network Load Balancer the gateway's Service gets (through the AWS Load Balancer
   * Controller annotations, passed on by `spec.infrastructure.annotations`).
   * @default 'internal'
   */
  readonly loadBalancerScheme?: string;
}

/**
 * Options of {@link GatewayExposure.existingGateway}.
 */
export interface ExistingGatewayOptions {
  /** Name of the Gateway the HTTPRoute attaches to. */
  readonly name: string;
  /**
   * Namespace of the Gateway (it must allow routes from the workload's namespace).
   * @default - the workload's namespace
   */
  readonly namespace?: string;
  /**
   * Host names the route answers for.
   * @default - every host name
   */
  readonly hostnames?: string[];
}

/**
 * Options of {@link GatewayExposure.inferencePool}.
 */
export interface InferencePoolExposureOptions {
  /** Gateway the HTTPRoute attaches to. */
  readonly gateway: ExistingGatewayOptions;
  /**
   * Service of a Gateway API Inference Extension endpoint picker (EPP), e.g. llm-d's.
   * @default - none: the gateway implementation balances the pool itself
   */
  readonly endpointPickerService?: string;
  /**
   * Port of the endpoint picker Service.
   * @default 9002 (the inference extension's conventional ext-proc port)
   */
  readonly endpointPickerPort?: number;
}

/**
 * How clients reach the deployment from outside the cluster.
 *
 * A union-like class. `none()` keeps the router a ClusterIP Service; `gateway(...)` adds a Gateway and
 * an HTTPRoute to the router; `existingGateway(...)` adds only the HTTPRoute; `inferencePool(...)`
 * exposes the decode pods as a Gateway API Inference Extension `InferencePool` (the gateway's endpoint
 * picker then chooses pods, bypassing this library's router and its prefill/decode split).
 *
 * @see https://gateway-api.sigs.k8s.io/api-types/httproute/
 * @see https://gateway-api-inference-extension.sigs.k8s.io/api-types/inferencepool/
 */
export class GatewayExposure {
  /** No Gateway API objects: reach the router Service from inside the cluster. */
  public static none(): GatewayExposure {
    return new GatewayExposure('none', undefined, undefined, undefined);
  }

  /** A new Gateway (Istio by default) and an HTTPRoute from it to the router Service. */
  public static gateway(options?: NewGatewayOptions): GatewayExposure {
    const port = options?.port ?? 80;
    if (!(Number.isInteger(port) && port >= 1 && port <= 65535)) {
      throw new Error(`'gateway.port' (${port}) must be a TCP port from 1 to 65535`);
    }
    const scheme = options?.loadBalancerScheme ?? 'internal';
    if (scheme !== 'internal' && scheme !== 'internet-facing') {
      throw new Error(`'gateway.loadBalancerScheme' ('${scheme}') must be 'internal' or 'internet-facing'`);
    }
    return new GatewayExposure('gateway', { ...options, port, loadBalancerScheme: scheme }, undefined, undefined);
  }

  /** An HTTPRoute from an existing Gateway to the router Service. */
  public static existingGateway(options: ExistingGatewayOptions): GatewayExposure {
    return new GatewayExposure('existing', undefined, options, undefined);
  }

  /** An InferencePool over the decode pods and an HTTPRoute from an existing Gateway to it. */
  public static inferencePool(options: InferencePoolExposureOptions): GatewayExposure {
    return new GatewayExposure('inference-pool', undefined, options.gateway, options);
  }

  /** 'none', 'gateway', 'existing' or 'inference-pool'. */
  public readonly kind: string;
  /**
   * Options of a new Gateway.
   * @default - no new Gateway
   */
  public readonly newGateway?: NewGatewayOptions;
  /**
   * The existing Gateway routes attach to.
   * @default - none
   */
  public readonly existing?: ExistingGatewayOptions;
  /**
   * InferencePool options.
   * @default - no InferencePool
   */
  public readonly pool?: InferencePoolExposureOptions;

  private constructor(kind: string, newGateway?: NewGatewayOptions, existing?: ExistingGatewayOptions, pool?: InferencePoolExposureOptions) {
    this.kind = kind;
    this.newGateway = newGateway;
    this.existing = existing;
    this.pool = pool;
  }
}
