/**
 * A Secret holding the API keys that clients present to the router (`Authorization: Bearer <key>`, the
 * `api_key` of the OpenAI SDKs), one per line.
 *
 * The router reads the keys when it starts (it does not start without one) and again within about a
 * second of the kubelet updating the mounted Secret, so a key is rotated by editing the Secret: add the
 * new key, move clients over, remove the old one. Paths under `/v1/` and `/tokenize`, `/detokenize` need a
 * key, as with vLLM's `--api-key`; `/health`, `/ready` and `/metrics` do not. The router removes the
 * header before it forwards a request: workers see no key.
 *
 * Create it with e.g. `kubectl create secret generic llm-api-keys -n inference --from-file=keys=./keys.txt`.
 */
export interface ApiKeySecret {
  /** Name of the Secret, in the workload's namespace. */
  readonly name: string;
  /**
   * The Secret's data key whose value lists the API keys, one per line ('#' comments and blank lines skipped).
   * @default 'keys'
   */
  readonly key?: string;
}
