import * as fs from 'fs';
import * as path from 'path';
import { Annotations, Token } from 'aws-cdk-lib';
import { DockerImageAsset, Platform } from 'aws-cdk-lib/aws-ecr-assets';
import { Construct } from 'constructs';
import { AcceleratedInstanceType, CpuArchitecture } from '../catalog';

/**
 * The package root, the Docker build context of every engine image: it holds both `engine/`
 * (the sources the builder stage compiles) and `images/`. This file compiles from `src/aws` to
 * `lib/aws`, both two levels below the root, so the same relative path works under ts-jest
 * and from the published package (`node_modules/disagg`).
 */
const PACKAGE_ROOT = path.resolve(__dirname, '..', '..');

const PLATFORM_BY_ARCHITECTURE: Record<CpuArchitecture, string> = {
  [CpuArchitecture.X86_64]: 'linux/amd64',
  [CpuArchitecture.ARM_64]: 'linux/arm64',
};

/**
 * One of the engine images under `images/` in this package.
 *
 * @see https://github.com/disagg/disagg/tree/main/images
 */
export class EngineImageVariant {
  /**
   * vLLM with EFA/libfabric (NIXL) and `disagg-engine`: prefill, decode and expert-parallel
   * worker pods on NVIDIA instances. linux/amd64 uses AWS's vLLM DLC for EC2; linux/arm64
   * (p6e-gb200) uses upstream vLLM plus the AWS EFA installer.
   */
  public static readonly FULL = new EngineImageVariant('engine', 'FULL',
    [CpuArchitecture.X86_64, CpuArchitecture.ARM_64]);

  /**
   * `disagg-engine` alone on Debian slim, running as uid 10001: router, kvstore and sim-worker pods.
   */
  public static readonly SLIM = new EngineImageVariant('engine-slim', 'SLIM',
    [CpuArchitecture.X86_64, CpuArchitecture.ARM_64]);

  /**
   * The AWS Neuron vLLM DLC with EFA and `disagg-engine`: worker pods on Trainium2 (x86_64 only).
   */
  public static readonly NEURON = new EngineImageVariant('engine-neuron', 'NEURON',
    [CpuArchitecture.X86_64]);

  /** Folder of the variant under `images/`, e.g. `engine-slim`. */
  public readonly name: string;

  /** The Dockerfile, relative to the build context (the package root), e.g. `images/engine-slim/Dockerfile`. */
  public readonly dockerfile: string;

  /** CPU architectures the Dockerfile builds for. */
  public readonly architectures: CpuArchitecture[];

  /** Name of the static member, for messages. */
  private readonly memberName: string;

  private constructor(name: string, memberName: string, architectures: CpuArchitecture[]) {
    this.name = name;
    this.memberName = memberName;
    this.dockerfile = `images/${name}/Dockerfile`;
    this.architectures = architectures;
  }

  /** Docker platforms (`linux/amd64`, `linux/arm64`) the Dockerfile builds for. */
  public get platforms(): string[] {
    return this.architectures.map((a) => PLATFORM_BY_ARCHITECTURE[a]);
  }

  /** `EngineImageVariant.FULL` and so on. */
  public toString(): string {
    return `EngineImageVariant.${this.memberName}`;
  }
}

/** Options of {@link EngineImage.fromAsset}. */
export interface EngineImageAssetOptions {
  /**
   * Which image to build.
   *
   * @default EngineImageVariant.FULL
   */
  readonly variant?: EngineImageVariant;

  /**
   * Platform to build for. Must match the nodes the pods land on: `Platform.LINUX_ARM64` for
   * p6e-gb200 (Grace), `Platform.LINUX_AMD64` for every other accelerated instance type.
   * {@link EngineImage.platformFor} derives it from an instance type.
   *
   * @default Platform.LINUX_AMD64
   */
  readonly platform?: Platform;

  /**
   * Extra `--build-arg`s, e.g. `DISAGG_REVISION` (the `org.opencontainers.image.revision` label)
   * or `ENGINE_BUILD_JOBS`. `DISAGG_VERSION` is set to this package's version unless given here.
   *
   * @default - only DISAGG_VERSION
   */
  readonly buildArgs?: { [key: string]: string };
}

/** An engine image bound to a scope. */
export interface EngineImageConfig {
  /** Image URI for a pod's `image` field. */
  readonly imageUri: string;

  /**
   * The asset that builds the image, for images from {@link EngineImage.fromAsset}
   * (e.g. to grant pulls on `asset.repository`).
   *
   * @default - none: the image comes from a registry
   */
  readonly asset?: DockerImageAsset;
}

/**
 * The container image that runs `disagg-engine` (and vLLM, in the FULL and NEURON variants).
 *
 * Either built from this package's `images/` at deploy time (`fromAsset`; `cdk deploy` needs
 * Docker with BuildKit) or taken from a registry (`fromRegistry`).
 */
export abstract class EngineImage {
  /**
   * Builds one of the package's Dockerfiles as a CDK Docker image asset: `cdk deploy` builds it
   * from the package root and pushes it to the bootstrap ECR repository.
   */
  public static fromAsset(options: EngineImageAssetOptions = {}): EngineImage {
    return new AssetEngineImage(options);
  }

  /**
   * An image that is already in a registry, e.g. one built from `images/` by your CI.
   * Pin it with a version tag or a digest; a missing tag or `latest` draws a warning on bind.
   */
  public static fromRegistry(imageUri: string): EngineImage {
    return new RegistryEngineImage(imageUri);
  }

  /**
   * The Docker platform of an instance type's CPU: `linux/arm64` for p6e-gb200, else `linux/amd64`.
   */
  public static platformFor(instanceType: AcceleratedInstanceType): Platform {
    return instanceType.architecture === CpuArchitecture.ARM_64 ? Platform.LINUX_ARM64 : Platform.LINUX_AMD64;
  }

  /**
   * Resolves the image in a scope (creating the asset there on first use; later binds to the same
   * scope reuse it).
   */
  public abstract bind(scope: Construct): EngineImageConfig;
}

class AssetEngineImage extends EngineImage {
  private readonly variant: EngineImageVariant;
  private readonly platform: Platform;
  private readonly buildArgs: { [key: string]: string };

  constructor(options: EngineImageAssetOptions) {
    super();
    this.variant = options.variant ?? EngineImageVariant.FULL;
    this.platform = options.platform ?? Platform.LINUX_AMD64;

    const wanted = this.platform.platform;
    if (!this.variant.platforms.includes(wanted)) {
      const fix = this.variant.platforms.map(platformMember).join(' or ');
      throw new Error(`EngineImage.fromAsset: 'platform' (${wanted}) is not built by ${this.variant} `
        + `(${this.variant.platforms.join(', ')}); use ${fix}`);
    }
    const dockerfile = path.join(PACKAGE_ROOT, this.variant.dockerfile);
    if (!fs.existsSync(dockerfile)) {
      throw new Error(`EngineImage.fromAsset: '${this.variant.dockerfile}' not found under ${PACKAGE_ROOT}; `
        + 'the disagg package ships images/ and engine/, so reinstall it, or use EngineImage.fromRegistry(uri)');
    }
    this.buildArgs = { DISAGG_VERSION: packageVersion(), ...options.buildArgs };
  }

  public bind(scope: Construct): EngineImageConfig {
    const id = `EngineImage-${this.variant.name}-${this.platform.platform.replace('/', '-')}`;
    const existing = scope.node.tryFindChild(id);
    const asset = existing instanceof DockerImageAsset ? existing : new DockerImageAsset(scope, id, {
      directory: PACKAGE_ROOT,
      file: this.variant.dockerfile,
      platform: this.platform,
      buildArgs: this.buildArgs,
      displayName: `disagg ${this.variant.name} (${this.platform.platform})`,
    });
    return { imageUri: asset.imageUri, asset };
  }
}

class RegistryEngineImage extends EngineImage {
  constructor(private readonly imageUri: string) {
    super();
    if (!Token.isUnresolved(imageUri) && imageUri.trim() === '') {
      throw new Error("EngineImage.fromRegistry: 'imageUri' is empty; pass a pinned image such as "
        + "'123456789012.dkr.ecr.us-east-1.amazonaws.com/disagg-engine:0.1.0'");
    }
  }

  public bind(scope: Construct): EngineImageConfig {
    if (!Token.isUnresolved(this.imageUri) && !isPinned(this.imageUri)) {
      Annotations.of(scope).addWarningV2('disagg:engineImageUnpinned',
        `Engine image '${this.imageUri}' has no version tag or digest (or uses 'latest'): pods may run `
        + 'different builds after a restart. Pin it, e.g. ...:0.1.0 or ...@sha256:<digest>.');
    }
    return { imageUri: this.imageUri };
  }
}

/** True when a reference carries a digest, or a tag other than `latest`. */
function isPinned(reference: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(reference)) return true;
  // The tag is after the last ':' that follows the last '/' (a ':' before it is a registry port).
  const lastSegment = reference.slice(reference.lastIndexOf('/') + 1);
  const colon = lastSegment.lastIndexOf(':');
  if (colon < 0) return false;
  const tag = lastSegment.slice(colon + 1);
  return tag !== '' && tag !== 'latest';
}

function platformMember(platform: string): string {
  return platform === 'linux/arm64' ? 'Platform.LINUX_ARM64' : 'Platform.LINUX_AMD64';
}

/** This package's version (the image's `org.opencontainers.image.version` label). */
function packageVersion(): string {
  try {
    const pkg = JSON.parse(fs.readFileSync(path.join(PACKAGE_ROOT, 'package.json'), 'utf8'));
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}
