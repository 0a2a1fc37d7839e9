/**
 * A Kubernetes Secret key that holds a Hugging Face access token.
 */
export interface HuggingFaceTokenSecret {
  /** Name of the Secret, in the workload's namespace. */
  readonly name: string;
  /**
   * Key inside the Secret whose value is the token.
   * @default 'token'
   */
  readonly key?: string;
}

/**
 * Options of {@link ModelSource.huggingFace}.
 */
export interface HuggingFaceSourceOptions {
  /**
   * Secret holding a Hugging Face token, exported to the workers as `HF_TOKEN` (gated repositories such
   * as meta-llama need one).
   * @default - no token: only public repositories load
   * @see https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables#hftoken
   */
  readonly tokenSecret?: HuggingFaceTokenSecret;
  /**
   * Git revision (branch, tag or commit) to load (vLLM `--revision`).
   * @default - the repository's default branch
   */
  readonly revision?: string;
}

/**
 * Options of {@link ModelSource.s3}.
 */
export interface S3SourceOptions {
  /**
   * AWS Region of the bucket, exported as `AWS_REGION`.
   * @default - on an InferenceCluster, the stack's Region; elsewhere the SDK's default resolution (the
   * node's instance metadata, which pods cannot reach when IMDS answers one hop only)
   */
  readonly region?: string;
}

/**
 * Where the workers load the model weights from.
 *
 * A union-like class: use `ModelSource.huggingFace(...)` or `ModelSource.s3(...)`.
 */
export class ModelSource {
  /**
   * A Hugging Face Hub repository, downloaded by vLLM into the model cache on first start.
   *
   * @param repositoryId 'owner/repo', e.g. 'meta-llama/Llama-3.3-70B-Instruct'
   * @throws when the id is not 'owner/repo'
   */
  public static huggingFace(repositoryId: string, options?: HuggingFaceSourceOptions): ModelSource {
    if (!/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(repositoryId ?? '')) {
      throw new Error(`'modelSource' ('${repositoryId}') must be a Hugging Face id 'owner/repo', e.g. 'meta-llama/Llama-3.3-70B-Instruct'`);
    }
    if (options?.tokenSecret !== undefined && !isDnsSubdomain(options.tokenSecret.name)) {
      throw new Error(`'tokenSecret.name' ('${options.tokenSecret.name}') must be a Kubernetes Secret name (lower case, digits, '-' and '.')`);
    }
    return new ModelSource('huggingface', repositoryId, options?.tokenSecret, options?.revision, undefined);
  }

  /**
   * Safetensors files under an S3 prefix, streamed straight into GPU memory by vLLM's Run:ai model
   * streamer (`--load-format runai_streamer`). The pods' ServiceAccount needs read access to the prefix:
   * `InferenceCluster.addWorkload` grants it through EKS Pod Identity; on another cluster, bind a role to
   * the ServiceAccounts annotated `disagg.dev/s3-read` (Pod Identity, or IRSA through
   * `serviceAccountAnnotations`).
   *
   * @param uri 's3://bucket/prefix'
   * @throws when the URI is not 's3://bucket/...'
   * @see https://docs.vllm.ai/en/latest/models/extensions/runai_model_streamer.html
   */
  public static s3(uri: string, options?: S3SourceOptions): ModelSource {
    if (!/^s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](\/.*)?$/.test(uri ?? '')) {
      throw new Error(`'modelSource' ('${uri}') must be an S3 URI 's3://bucket/prefix' holding the model's safetensors and config files`);
    }
    return new ModelSource('s3', uri, undefined, undefined, options?.region);
  }

  /** 'huggingface' or 's3'. */
  public readonly kind: string;
  /** The Hugging Face id or the S3 URI: what vLLM gets as `--model`. */
  public readonly uri: string;
  /**
   * The Hugging Face token Secret.
   * @default - none
   */
  public readonly tokenSecret?: HuggingFaceTokenSecret;
  /**
   * The Hugging Face revision.
   * @default - the default branch
   */
  public readonly revision?: string;
  /**
   * The S3 bucket's Region.
   * @default - SDK default
   */
  public readonly region?: string;

  private constructor(kind: string, uri: string, tokenSecret?: HuggingFaceTokenSecret, revision?: string, region?: string) {
    this.kind = kind;
    this.uri = uri;
    this.tokenSecret = tokenSecret;
    this.revision = revision;
    this.region = region;
  }
}

function isDnsSubdomain(name: string | undefined): boolean {
  return name !== undefined && name.length <= 253 && /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(name);
}
