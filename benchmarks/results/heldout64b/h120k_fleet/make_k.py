"""h120j's plan (cap 4, with a 1% 5k-token class) rewritten to h120k's demand (the same spec without that class):
l70 class a at 3.0 req/s, class z dropped, routing shares kept and rps rescaled. Simulated with --spec h120k."""
import json, sys
d = json.load(open('/work/ho64b/h120j-caps-h100-4-plus-5k-class.out/plan.json'))
m = [x for x in d['models'] if x['name'] == 'l70'][0]
m['classes'] = [dict(m['classes'][0], share=1.0, rate_rps=3.0)]
m['max_model_len'] = 1800
rbo = d['routing_by_origin']['l70']
rbo['us-east-1'].pop('z'); rbo['us-west-2'].pop('z')
for o, tot in (('us-east-1', 1.5), ('us-west-2', 1.5)):
    for r in rbo[o]['a']:
        r['rps'] = round(r['share'] * tot, 6)
agg = {}
for o in rbo.values():
    for r in o['a']:
        agg[r['unit']] = agg.get(r['unit'], 0) + r['rps']
d['routing']['l70'] = {'a': [{'unit': u, 'share': round(v / 3.0, 6), 'rps': round(v, 6)} for u, v in agg.items()]}
for a in d['allocations']:
    if a['unit'] in agg:
        a['utilization'] = round(a['utilization'] * agg[a['unit']] / a['routed_rps'], 4)
        a['routed_rps'] = round(agg[a['unit']], 6)
d['inputs']['spec_path'] = '/work/ho64b/h120k-caps-h100-4.yaml'
json.dump(d, open('/work/ho64b/h120k_fleet/plan.json', 'w'), indent=1)
print(agg)
