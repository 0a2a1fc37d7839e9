import { container, defaultProps, find, routerConfigValidator, synthInference, validateManifests } from './util';
import { GatewayExposure } from '../../src';

const configOf = (manifests: any[]) => JSON.parse(find(manifests, 'ConfigMap', 'router-config').data['config.json']);

describe('router API keys', () => {
  test('the Secret is mounted as a directory and the router (uid 65532, no fsGroup) reads the file it holds', () => {
    // GIVEN WHEN
    const { manifests } = synthInference(defaultProps({ apiKeys: { name: 'llm-api-keys' } }));
    const router = find(manifests, 'Deployment', 'router');
    const config = configOf(manifests);
    // THEN the config names the mounted file, and the schema the router is built from accepts it
    expect(config.router.apiKeys).toEqual({ file: '/etc/disagg/api-keys/keys' });
    expect(routerConfigValidator()(config)).toBe(true);
    const volume = router.spec.template.spec.volumes.find((v: any) => v.name === 'api-keys');
    expect(volume.secret).toMatchObject({ secretName: 'llm-api-keys', items: [{ key: 'keys', path: 'keys' }] });
    // The kubelet's default mode (0644): a mode without 'other' read would lock out the non-root router.
    expect(volume.secret.defaultMode ?? 0o644).toBe(0o644);
    const mount = container(router).volumeMounts.find((m: any) => m.name === 'api-keys');
    // No subPath: the kubelet's Secret updates (a rotation) reach a directory mount only.
    expect(mount).toEqual({ name: 'api-keys', mountPath: '/etc/disagg/api-keys', readOnly: true });
    expect(`${mount.mountPath}/${volume.secret.items[0].path}`).toBe(config.router.apiKeys.file);
    expect(validateManifests(manifests).errors).toEqual([]);
  });

  test('another data key of the Secret', () => {
    const { manifests } = synthInference(defaultProps({ apiKeys: { name: 'shared', key: 'llm.keys' } }));
    const volume = find(manifests, 'Deployment', 'router').spec.template.spec.volumes.find((v: any) => v.name === 'api-keys');
    expect(volume.secret.items).toEqual([{ key: 'llm.keys', path: 'keys' }]);
  });

  test('without apiKeys nothing is asked for, and an internet-facing gateway is warned about', () => {
    const { manifests, inference } = synthInference(defaultProps({ gateway: GatewayExposure.gateway({ loadBalancerScheme: 'internet-facing' }) }));
    expect(configOf(manifests).router.apiKeys).toBeUndefined();
    expect(inference.warnings.join('\n')).toMatch(/asks for no API key.*'apiKeys'/);
    const keyed = synthInference(defaultProps({ apiKeys: { name: 'k' }, gateway: GatewayExposure.gateway({ loadBalancerScheme: 'internet-facing' }) }));
    expect(keyed.inference.warnings.join('\n')).not.toMatch(/API key/);
  });

  test('bad Secret references are refused with the form expected', () => {
    expect(() => synthInference(defaultProps({ apiKeys: { name: 'My_Keys' } }))).toThrow(/'apiKeys.name' \('My_Keys'\) must be a Kubernetes Secret name/);
    expect(() => synthInference(defaultProps({ apiKeys: { name: 'k', key: 'a/b' } }))).toThrow(/'apiKeys.key' \('a\/b'\) must be a Secret data key/);
  });
});
