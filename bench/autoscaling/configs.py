#!/usr/bin/env python3
"""Configurations of bench/autoscaling.sh in DIR (argv[1]) from DIR/base.json (base-config.ts):
peak-P-D.json (static P prefill + D decode replicas at the peak, 40 req/s for 30 min: the peer search),
day-static.json (the peer, static over the diurnal day), day-auto.json (autoscaled 1-8 per pool,
starting at the peer), surge.jsonl + surge.json (a long-prompt surge, autoscaled up to 2 x MAXR per pool)."""
import copy, json, math, os, sys

base = json.load(open(sys.argv[1] + '/base.json'))
DAY = 86400

def diurnal(peak, trough_share=0.2, step=600, hours=24):
    """Poisson stages of `step` s: trough at 04:00, peak at 16:00 (raised cosine)."""
    out = []
    for k in range(int(hours * 3600 / step)):
        h = (k + 0.5) * step / 3600
        x = (1 - math.cos(2 * math.pi * (h - 4) / 24)) / 2
        out.append({'ratePerSecond': round(peak * (trough_share + (1 - trough_share) * x), 4), 'durationSeconds': step})
    return out

def provisioning(ckpt_bytes):
    # p5.48xlarge: S3 download at most 100 Gb/s per instance, half reached -> 6.25 GB/s;
    # 8 local NVMe drives at 2 GB/s read each -> 16 GB/s.
    return {'checkpointBytes': ckpt_bytes, 'networkBytesPerSecond': 6.25e9, 'nvmeBytesPerSecond': 16e9}

def config(P, D, stages, scaled=False, horizon=DAY, window=900, maxr=8, down=300, workload=None):
    c = copy.deepcopy(base)
    c['workload'] = copy.deepcopy(workload or base['workload'])
    c['workload'].pop('requests', None)
    c['workload']['arrival'] = {'process': 'poisson', 'stages': stages}
    c['autoscaling'] = {'horizonSeconds': horizon, 'windowSeconds': window, 'evaluationIntervalSeconds': 15}
    for p, n in zip(c['pools'], (P, D)):
        p['replicas'] = n
        if scaled:
            ckpt = p['weightBytesPerRank'] * p['tensorParallel']
            p['autoscaling'] = {'minReplicas': 1, 'maxReplicas': maxr, 'scaleDownStabilizationSeconds': down,
                                'provisioning': provisioning(ckpt)}
            if os.environ.get('TARGET'):  # the rule's target pressure (0.95, the default, when unset)
                p['autoscaling']['target'] = float(os.environ['TARGET'])
    return c

def surge_trace(path, rate=20, normal_in=2000, long_in=8000, out=300, seed=7):
    """Poisson arrivals at `rate`/s for 3 h; prompts ~normal_in tokens, except 01:00-02:00 when they
    are ~long_in (a long-prompt surge: same request rate, 4x the prompt tokens)."""
    import random
    rng = random.Random(seed)
    t = 0.0
    with open(path, 'w') as f:
        while True:
            t += rng.expovariate(rate)
            if t >= 3 * 3600: break
            mean = long_in if 3600 <= t < 7200 else normal_in
            inp = max(64, min(16000, int(rng.lognormvariate(math.log(mean) - 0.5 * math.log(1.25), math.sqrt(math.log(1.25))))))
            o = max(8, min(2000, int(rng.lognormvariate(math.log(out) - 0.5 * math.log(1.44), math.sqrt(math.log(1.44))))))
            f.write('{"timestamp_ms": %d, "input_length": %d, "output_length": %d}\n' % (round(t * 1000), inp, o))

def surge_config(path, trace, P=2, D=2, maxr=8):
    c = config(P, D, [{'ratePerSecond': 1, 'durationSeconds': 1}], scaled=True, horizon=3 * 3600, window=300, maxr=maxr)
    c['workload'] = {'kind': 'trace', 'trace': {'path': trace}}
    json.dump(c, open(path, 'w'), indent=1)


if __name__ == '__main__':
    # configs.py DIR peaks P-D,...: the peer search's candidates at the peak (40 req/s, 30 min)
    # configs.py DIR day P-D [MAXR]: the day, static at the peer P + D and autoscaled from it (1..MAXR per
    # pool, 8 by default), and the long-prompt surge (autoscaled from half the peer)
    d, what, arg = sys.argv[1], sys.argv[2], sys.argv[3]
    if what == 'peaks':
        for pd in arg.split(','):
            P, D = map(int, pd.split('-'))
            json.dump(config(P, D, [{'ratePerSecond': 40, 'durationSeconds': 1800}], horizon=0), open(f'{d}/peak-{P}-{D}.json', 'w'))
    else:
        P, D = map(int, arg.split('-'))
        maxr = int(sys.argv[4]) if len(sys.argv) > 4 else 8
        json.dump(config(P, D, diurnal(40)), open(f'{d}/day-static.json', 'w'))
        json.dump(config(P, D, diurnal(40), scaled=True, maxr=maxr), open(f'{d}/day-auto.json', 'w'))
        surge_trace(f'{d}/surge.jsonl')
        # The surge's 4x prompt tokens need ~9 TP4 prefill replicas at the target: room to 2 x MAXR, so
        # the pool's maximum is not what stops it (at most 16: two pools of 2 x 16 slots fill the
        # router's 64 endpoints).
        surge_config(f'{d}/surge.json', f'{d}/surge.jsonl', max(1, P // 2), max(1, D // 2) if D > 2 else D, min(16, 2 * maxr))
