"""h120l's plan (h120b + a 1% 5k-token class for l70, so that TP1 x PP2 pipelines over two p5.4xlarge are offered) rewritten
to h120b's demand: l70 class z dropped, class a at the model's whole rate, routing shares per origin kept and rps rescaled.
Simulated with --spec h120b."""
import json
d = json.load(open('/work/ho64b/h120l-caps-tight-plus-5k-class.out/plan.json'))
m = [x for x in d['models'] if x['name'] == 'l70'][0]
rate = m['rate_rps']
m['classes'] = [dict(m['classes'][0], share=1.0, rate_rps=rate)]
m['max_model_len'] = 1800
origins = d['origins']['l70']
rbo = d['routing_by_origin']['l70']
agg = {}
for o, routes in rbo.items():
    routes.pop('z', None)
    tot = rate * origins[o]['share']
    for r in routes['a']:
        r['rps'] = round(r['share'] * tot, 6)
        agg[r['unit']] = agg.get(r['unit'], 0) + r['rps']
d['routing']['l70'] = {'a': [{'unit': u, 'share': round(v / rate, 6), 'rps': round(v, 6)} for u, v in agg.items()]}
for a in d['allocations']:
    if a['unit'] in agg:
        a['utilization'] = round(a['utilization'] * agg[a['unit']] / a['routed_rps'], 4)
        a['routed_rps'] = round(agg[a['unit']], 6)
d['inputs']['spec_path'] = '/work/ho64b/h120b-linked-caps-tight-uswest.yaml'
json.dump(d, open('/work/ho64b/h120b_fleet/plan.json', 'w'), indent=1)
print(agg, d['cost_usd_per_hour'])
