/**
 * How a new Gateway's listener terminates TLS.
 *
 * A union-like class. `certificateSecret(...)` terminates at the gateway's pods with a certificate from
 * a `kubernetes.io/tls` Secret (cert-manager writes one); `acmCertificate(...)` terminates at the Network
 * Load Balancer with an AWS Certificate Manager certificate, so no private key enters the cluster.
 *
 * @see https://gateway-api.sigs.k8s.io/guides/tls/
 * @see https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/guide/service/annotations/#ssl-cert
 */
export class GatewayTls {
  /** An HTTPS listener whose certificate and key are in a `kubernetes.io/tls` Secret in the Gateway's namespace. */
  public static certificateSecret(secretName: string): GatewayTls {
    if (!/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(secretName)) {
      throw new Error(`GatewayTls.certificateSecret('${secretName}'): not a Secret name (lowercase letters, digits, '-' and '.')`);
    }
    return new GatewayTls('secret', secretName);
  }

  /**
   * TLS at the Network Load Balancer with an ACM certificate (`aws-load-balancer-ssl-cert`); the NLB
   * forwards decrypted traffic to the gateway's plain HTTP listener inside the VPC.
   * @param certificateArn 'arn:aws:acm:<region>:<account>:certificate/<id>'
   */
  public static acmCertificate(certificateArn: string): GatewayTls {
    if (!/^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate\/[A-Za-z0-9-]+$/.test(certificateArn)) {
      throw new Error(`GatewayTls.acmCertificate('${certificateArn}'): not an ACM certificate ARN; `
        + "expected 'arn:aws:acm:<region>:<account>:certificate/<id>' (aws acm list-certificates)");
    }
    return new GatewayTls('acm', certificateArn);
  }

  /** 'secret' or 'acm'. */
  public readonly kind: string;
  /** The Secret's name or the certificate's ARN. */
  public readonly reference: string;

  private constructor(kind: string, reference: string) {
    this.kind = kind;
    this.reference = reference;
  }
}

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
   * Listener port.
   * @default 443 with `tls`, else 80
   */
  readonly port?: number;
  /**
   * TLS for the listener. Without it the listener speaks plain HTTP: keep such a gateway internal.
   * @default - none: plain HTTP (a warning when `loadBalancerScheme` is 'internet-facing')
   */
  readonly tls?: GatewayTls;
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
    const port = options?.port ?? (options?.tls ? 443 : 80);
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
