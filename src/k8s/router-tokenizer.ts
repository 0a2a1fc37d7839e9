/**
 * Options of {@link RouterTokenizer.fromModelSource}.
 */
export interface RouterTokenizerDownloadOptions {
  /**
   * Image of the init container that downloads the files. A Hugging Face source runs `curl`, an S3
   * source the AWS CLI (`aws s3 cp`).
   * @default - Hugging Face: the router's own image (both engine images carry curl and CA certificates);
   * S3: RouterTokenizer.AWS_CLI_IMAGE
   */
  readonly image?: string;
}

/**
 * Where the router gets the served model's tokenizer files: `tokenizer.json`, `tokenizer_config.json`
 * (with the chat template) and `chat_template.jinja` when the model keeps its template there.
 *
 * With them the router tokenizes every prompt as vLLM does (the chat template rendered, then the
 * model's tokenizer), hashes the token ids in blocks, and matches them against the blocks vLLM reports
 * in its KV events: precise prefix routing (`prefixSource: auto` in its configuration). Without them,
 * or when they fail to load, it routes on its own routing history (approximate), and says so in its
 * log and in `disagg_router_prefix_source_info{source="history"}`.
 *
 * A union-like class: use `RouterTokenizer.fromModelSource()`, `.fromPersistentVolumeClaim(...)`,
 * `.fromConfigMap(...)` or `.none()`.
 */
export class RouterTokenizer {
  /**
   * The AWS CLI image that copies the files of an S3 model source (ECR Public, the official image).
   * @see https://docs.aws.amazon.com/cli/latest/userguide/getting-started-docker.html
   */
  public static readonly AWS_CLI_IMAGE = 'public.ecr.aws/aws-cli/aws-cli:2.37.5';

  /**
   * Downloaded when the router starts, by an init container, from where the workers load the model:
   * the Hugging Face repository at the same revision with the same token Secret
   * (`https://huggingface.co/<repo>/resolve/<revision>/<file>`, or `$HF_ENDPOINT`), or the same S3
   * prefix with the pods' service account. The router's pods need egress to it. A failed download
   * leaves the router routing approximately, never crash-looping.
   */
  public static fromModelSource(options: RouterTokenizerDownloadOptions = {}): RouterTokenizer {
    if (options.image !== undefined && !IMAGE.test(options.image)) {
      throw new Error(`'routerTokenizer' image ('${options.image}') must be an image reference such as '${RouterTokenizer.AWS_CLI_IMAGE}'`);
    }
    return new RouterTokenizer('model-source', undefined, undefined, options.image);
  }

  /**
   * Files in a PersistentVolumeClaim in the workload's namespace (mounted read-only; ReadOnlyMany or
   * ReadWriteMany when the router runs several replicas on several nodes).
   *
   * @param claimName the claim's name
   * @param subPath the folder inside the volume holding the files
   * @default subPath - the volume's root
   */
  public static fromPersistentVolumeClaim(claimName: string, subPath?: string): RouterTokenizer {
    if (!DNS_SUBDOMAIN.test(claimName ?? '') || claimName.length > 253) {
      throw new Error(`'routerTokenizer' claim name ('${claimName}') must be a Kubernetes object name (lower case, digits, '-' and '.')`);
    }
    if (subPath !== undefined && (subPath.startsWith('/') || subPath.split('/').includes('..') || subPath === '')) {
      throw new Error(`'routerTokenizer' subPath ('${subPath}') must be a relative folder inside the volume, without '..', e.g. 'qwen3-32b'`);
    }
    return new RouterTokenizer('persistent-volume-claim', claimName, subPath, undefined);
  }

  /**
   * Files in a ConfigMap in the workload's namespace, one key per file (`tokenizer.json`,
   * `tokenizer_config.json`, optionally `chat_template.jinja`). A ConfigMap holds at most 1 MiB, so this
   * fits small vocabularies only: the tokenizer.json of Llama 3.x, Qwen3 or DeepSeek-V3 is 7-9 MB; use a
   * volume or `fromModelSource()` for them.
   *
   * @param name the ConfigMap's name
   */
  public static fromConfigMap(name: string): RouterTokenizer {
    if (!DNS_SUBDOMAIN.test(name ?? '') || name.length > 253) {
      throw new Error(`'routerTokenizer' ConfigMap name ('${name}') must be a Kubernetes object name (lower case, digits, '-' and '.')`);
    }
    return new RouterTokenizer('config-map', name, undefined, undefined);
  }

  /**
   * No tokenizer: the router routes on its own routing history (approximate prefix routing, as
   * llm-d's approximate scorer does), for models whose files the router may not fetch.
   */
  public static none(): RouterTokenizer {
    return new RouterTokenizer('none', undefined, undefined, undefined);
  }

  /** 'model-source', 'persistent-volume-claim', 'config-map' or 'none'. */
  public readonly kind: string;
  /**
   * The claim's or the ConfigMap's name.
   * @default - none
   */
  public readonly name?: string;
  /**
   * Folder inside the claim's volume.
   * @default - the volume's root
   */
  public readonly subPath?: string;
  /**
   * Image of the download init container.
   * @default - see RouterTokenizerDownloadOptions.image
   */
  public readonly image?: string;

  private constructor(kind: string, name?: string, subPath?: string, image?: string) {
    this.kind = kind;
    this.name = name;
    this.subPath = subPath;
    this.image = image;
  }
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
// registry/repository[:tag][@digest], no spaces.
const IMAGE = /^[a-z0-9][\w.\-/:]*(@sha256:[0-9a-f]{64})?$/i;
