"""Price and availability feeds (installed as ``hetinfra.price_feeds``).

Every source yields validated :class:`~hetinfra.price_feeds.offers.Offer` rows collected in an
:class:`~hetinfra.price_feeds.offers.OfferSnapshot` with its as-of time and content hash.

Modules: ``offers`` (Offer, OfferSnapshot, offers CSVs, the embedded snapshot), ``load``
(``load_offers``, ``refresh``), ``base`` (the adapter interface), ``aws``/``azure``/``gcp``/
``skypilot``/``local`` (adapters), ``http`` (bounded urllib client), ``store`` (snapshot store),
``validate`` (drop-with-reason), ``families`` (instance type -> GPU tables), ``availability`` and
``aws_api`` (caps, spot prices; boto3 optional), ``skypilot_catalog`` (catalog parsing shared
with tools/build_snapshot.py), ``config`` (URLs, regions, keys, limits; env variables).

This file imports nothing at load time (tools/build_snapshot.py imports the folder without
hetinfra installed); ``load_offers`` and ``refresh`` are resolved lazily.
"""

__all__ = ["load_offers", "refresh"]


def __getattr__(name):
    if name in __all__:
        from hetinfra.price_feeds import load

        return getattr(load, name)
    raise AttributeError(name)
